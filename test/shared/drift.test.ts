import { describe, expect, it } from 'vitest';
import {
  deriveDrift,
  diffValues,
  driftedAddresses,
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
