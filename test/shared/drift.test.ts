import { describe, expect, it } from 'vitest';
import {
  deriveDrift,
  diffValues,
  driftedAddresses,
  equivalentPaths,
  foldMirrors,
  groupOperations,
  parsePlanJson,
  SENSITIVE,
} from '../../shared/drift';

const rc = (
  address: string,
  actions: string[],
  after: unknown = {},
  extra: Record<string, unknown> = {},
) => ({
  address,
  mode: address.startsWith('data.') ? 'data' : 'managed',
  type: address.split('.')[address.startsWith('data.') ? 1 : 0] ?? '',
  name: address.split('.').pop() ?? '',
  change: { actions, before: {}, after, ...extra },
});

const declared = JSON.stringify({ id: 'sg', ingress: [443], name: 'sg' });
const actual = JSON.stringify({ id: 'sg', ingress: [443, 8080], name: 'sg' });

describe('deriveDrift', () => {
  it('splits drift into operations with the changed paths, reaching into JSON-string attributes', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [rc('rest_object.sg', ['update'], { data: actual, path: '/api' })],
      resource_changes: [rc('rest_object.sg', ['update'], { data: declared, path: '/api' })],
    });
    const [op] = deriveDrift(plan);
    expect(op).toMatchObject({
      address: 'rest_object.sg',
      drift_actions: ['update'],
      planned_actions: ['update'],
      changes: [{ path: 'data.ingress', declared: [443], actual: [443, 8080] }],
      attributes: { data: { declared, actual } },
    });
  });

  it('drops drift the code already matches (planned no-op) and data sources', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [rc('rest_object.fixed', ['update']), rc('data.http.x', ['update'])],
      resource_changes: [rc('rest_object.fixed', ['no-op'])],
    });
    expect(deriveDrift(plan)).toEqual([]);
  });

  it('reports a resource deleted out of band as a whole-resource change', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [rc('local_file.motd', ['delete'])],
      resource_changes: [rc('local_file.motd', ['create'], { content: 'x' })],
    });
    expect(deriveDrift(plan)).toEqual([
      expect.objectContaining({
        address: 'local_file.motd',
        drift_actions: ['delete'],
        changes: [{ path: '', declared: null, actual: null }],
      }),
    ]);
  });

  it('ignores computed values and never copies sensitive ones', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [rc('db.main', ['update'], { password: 'hunter2', arn: 'arn:1', size: 2 })],
      resource_changes: [
        rc(
          'db.main',
          ['update'],
          { password: 'old', size: 1 },
          { after_unknown: { arn: true }, after_sensitive: { password: true } },
        ),
      ],
    });
    const [op] = deriveDrift(plan);
    expect(op?.changes.map((c) => c.path).sort()).toEqual(['password', 'size']);
    expect(JSON.stringify(op)).not.toContain('hunter2');
    expect(op?.attributes.password).toEqual({ declared: SENSITIVE, actual: SENSITIVE });
  });

  it('redacts a value marked sensitive at any depth — map, list, object — by the code or the provider, before or after', () => {
    const actual = {
      tags: { Team: 'ops', token: 'tok-live-2' },
      environment: [{ variables: { PW: 'pw-live-2', MODE: 'b' } }],
      settings: { nested: { secret: 's-live-2', plain: 2 } },
      note: 'n2',
    };
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [
        rc('aws_lambda_function.f', ['update'], actual, {
          // The provider's marks on the refreshed value.
          after_sensitive: { environment: [{ variables: { PW: true } }] },
        }),
      ],
      resource_changes: [
        rc(
          'aws_lambda_function.f',
          ['update'],
          {
            tags: { Team: 'dev', token: 'tok-code-1' },
            environment: [{ variables: { PW: 'pw-code-1', MODE: 'a' } }],
            settings: { nested: { secret: 's-code-1', plain: 1 } },
            note: 'n1',
          },
          {
            // The code's marks: a map key, an object member; before_sensitive names the list's.
            after_sensitive: { tags: { token: true }, settings: { nested: { secret: true } } },
            before_sensitive: { environment: [{ variables: { PW: true } }] },
          },
        ),
      ],
    });
    const [op] = deriveDrift(plan);
    const text = JSON.stringify(op);
    for (const secret of ['tok-live-2', 'tok-code-1', 'pw-live-2', 'pw-code-1', 's-live-2', 's-code-1'])
      expect(text).not.toContain(secret);
    // A sensitive value that drifted is still drift, shown redacted; what is not sensitive is shown.
    expect(op?.changes).toEqual(
      expect.arrayContaining([
        { path: 'tags.Team', declared: 'dev', actual: 'ops' },
        { path: 'tags.token', declared: SENSITIVE, actual: SENSITIVE },
        { path: 'settings.nested.secret', declared: SENSITIVE, actual: SENSITIVE },
        { path: 'settings.nested.plain', declared: 1, actual: 2 },
        {
          path: 'environment',
          declared: [{ variables: { PW: SENSITIVE, MODE: 'a' } }],
          actual: [{ variables: { PW: SENSITIVE, MODE: 'b' } }],
        },
      ]),
    );
    expect(op?.attributes.tags).toEqual({
      declared: { Team: 'dev', token: SENSITIVE },
      actual: { Team: 'ops', token: SENSITIVE },
    });
    expect(op?.attributes.note).toEqual({ declared: 'n1', actual: 'n2' });
  });

  it('sorts by address and exposes the addresses', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [rc('b.x', ['update'], { v: 2 }), rc('a.x', ['delete'])],
      resource_changes: [rc('b.x', ['update'], { v: 1 }), rc('a.x', ['create'])],
    });
    expect(driftedAddresses(plan)).toEqual(['a.x', 'b.x']);
  });

  it('rejects input that is not a plan representation', () => {
    expect(() => parsePlanJson({ resource_drift: 'nope' })).toThrow();
  });
});

describe('mirrored attributes', () => {
  it('derives one change on the attribute the code declares: tags_all and the Google label mirrors fold into it', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [
        rc('aws_instance.web', ['update'], {
          tags: { Name: 'web', Team: 'ops' },
          tags_all: { Name: 'web', Team: 'ops' },
        }),
        rc('google_storage_bucket.logs', ['update'], {
          labels: { env: 'prod' },
          terraform_labels: { env: 'prod', managed: 'kumoss' },
          effective_labels: { env: 'prod', managed: 'kumoss', 'goog-x': '1' },
        }),
      ],
      resource_changes: [
        rc('aws_instance.web', ['update'], { tags: { Name: 'web' }, tags_all: { Name: 'web' } }),
        rc('google_storage_bucket.logs', ['update'], {
          labels: { env: 'dev' },
          terraform_labels: { env: 'dev', managed: 'kumoss' },
          effective_labels: { env: 'dev', managed: 'kumoss' },
        }),
      ],
    });
    const [web, bucket] = deriveDrift(plan);
    expect(web?.changes).toEqual([{ path: 'tags.Team', declared: undefined, actual: 'ops' }]);
    expect(Object.keys(web?.attributes ?? {})).toEqual(['tags']);
    // goog-x exists only in effective_labels: it stays, saying where it comes from.
    expect(bucket?.changes).toEqual([
      { path: 'labels.env', declared: 'dev', actual: 'prod' },
      {
        path: 'effective_labels.goog-x',
        declared: undefined,
        actual: '1',
        mirror_of: 'labels',
        note: "Only effective_labels.goog-x differs, not labels.goog-x: the value comes from the provider's default_labels or labels Google Cloud adds.",
      },
    ]);
  });

  it('a drift only in tags_all (the provider default_tags) says where it comes from', () => {
    const [op] = deriveDrift(
      parsePlanJson({
        format_version: '1.2',
        resource_drift: [rc('aws_s3_bucket.b', ['update'], { tags: {}, tags_all: { Owner: 'me' } })],
        resource_changes: [rc('aws_s3_bucket.b', ['update'], { tags: {}, tags_all: { Owner: 'ops' } })],
      }),
    );
    expect(op?.changes).toEqual([
      expect.objectContaining({
        path: 'tags_all.Owner',
        mirror_of: 'tags',
        note: "Only tags_all.Owner differs, not tags.Owner: the value comes from the provider's default_tags.",
      }),
    ]);
  });

  it('a whole-map change of tags (none declared) still folds its mirror keys', () => {
    expect(
      foldMirrors([
        { path: 'tags', declared: null, actual: { Team: 'x' } },
        { path: 'tags_all.Team', declared: undefined, actual: 'x' },
      ]).map((c) => c.path),
    ).toEqual(['tags']);
    expect(equivalentPaths('tags.Team')).toEqual(['tags.Team', 'tags_all.Team']);
    expect(equivalentPaths('labels.a')).toEqual(['labels.a', 'terraform_labels.a', 'effective_labels.a']);
    expect(equivalentPaths('tags_all.x')).toEqual(['tags_all.x', 'tags.x']);
  });
});

describe('diffValues', () => {
  it('compares objects key by key and lists as a whole', () => {
    expect(diffValues({ a: 1, b: { c: [1] } }, { a: 1, b: { c: [1, 2] }, d: true }, '')).toEqual([
      { path: 'b.c', declared: [1], actual: [1, 2] },
      { path: 'd', declared: undefined, actual: true },
    ]);
  });
});

describe('groupOperations', () => {
  it('batches operations in groups of the configured size', () => {
    expect(groupOperations([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 8)).toEqual([
      [1, 2, 3, 4, 5, 6, 7, 8],
      [9, 10],
    ]);
    expect(groupOperations([], 8)).toEqual([]);
    expect(() => groupOperations([1], 0)).toThrow(/positive integer/);
  });
});
