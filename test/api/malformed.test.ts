// A corpus of malformed requests (hand-written and generated), every one answered 4xx with a JSON
// error naming the problem: zero 5xx, no session created, no workflow started.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { startTestApi, type TestApi, testUser } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

const GOOD = {
  repository_url: 'https://git.example.com/team/infra.git',
  cloud: 'aws',
  scope_id: '123456789012',
  iac_path: 'envs/dev',
  text: 'Resolve the drift on security group sg-web-demo.',
};

const BAD_URLS = [
  'http://git.example.com/team/infra.git',
  'ftp://git.example.com/infra.git',
  'git@github.com:team/infra.git',
  'ssh://git@github.com/team/infra.git',
  'file:///etc/passwd',
  'https://user:secret@github.com/team/infra.git',
  'https://:secret@github.com/team/infra.git',
  'https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/team/infra.git',
  'https://github_pat_11ABCDEFG0123456789_abcdefghijklmnop@github.com/team/infra.git',
  'https://glpat-abcdefghij1234567890@gitlab.com/team/infra.git',
  'https://x-access-token@github.com/team/infra.git',
  'https://oauth2@gitlab.com/team/infra.git',
  'https://gitlab-ci-token@gitlab.com/team/infra.git',
  'https://0123456789abcdef0123456789abcdef01234567@github.com/team/infra.git',
  'https://github.com',
  'https://github.com/',
  'https://github.com/team/infra.git?token=abc',
  'https://github.com/team/infra.git#main',
  'not a url',
  '',
  'https://',
  '//github.com/team/infra.git',
];
const BAD_CLOUDS = ['AWS', 'amazon', 'gcp ', '', 'digitalocean', 'alibaba', 'k8s'];
const BAD_PATHS = [
  '/etc',
  '../outside',
  'envs/../../x',
  'envs/..',
  '..',
  'C:\\infra',
  'a\\..\\..\\b',
  'envs/\ndev',
];
const WRONG_TYPES: unknown[] = [null, 42, true, [], {}, ['a'], { a: 1 }, 1.5];
const EMPTY_TEXTS = ['', '   ', '\n\t'];

function corpus(): { name: string; mode: string; body: unknown }[] {
  const out: { name: string; mode: string; body: unknown }[] = [];
  for (const mode of ['partial', 'full']) {
    for (const u of BAD_URLS)
      out.push({ name: `repository_url ${u}`, mode, body: { ...GOOD, repository_url: u } });
    for (const c of BAD_CLOUDS) out.push({ name: `cloud ${c}`, mode, body: { ...GOOD, cloud: c } });
    for (const p of BAD_PATHS) out.push({ name: `iac_path ${p}`, mode, body: { ...GOOD, iac_path: p } });
    for (const t of EMPTY_TEXTS)
      out.push({ name: `text ${JSON.stringify(t)}`, mode, body: { ...GOOD, text: t } });
    for (const field of Object.keys(GOOD)) {
      const { [field]: _dropped, ...rest } = GOOD as Record<string, unknown>;
      if (field !== 'iac_path') out.push({ name: `missing ${field}`, mode, body: rest });
      for (const v of WRONG_TYPES)
        out.push({ name: `${field} as ${JSON.stringify(v)}`, mode, body: { ...GOOD, [field]: v } });
    }
    out.push({ name: 'scope_id blank', mode, body: { ...GOOD, scope_id: '  ' } });
    out.push({ name: 'unknown field', mode, body: { ...GOOD, provider: 'aws' } });
    out.push({ name: 'password field', mode, body: { ...GOOD, password: 'x' } });
    out.push({ name: 'body array', mode, body: [GOOD] });
    out.push({ name: 'body number', mode, body: 42 });
    out.push({ name: 'body string', mode, body: JSON.stringify('hello') });
    out.push({ name: 'body null', mode, body: 'null' });
    out.push({ name: 'malformed JSON', mode, body: '{"repository_url": ' });
    out.push({ name: 'trailing comma', mode, body: '{"cloud": "aws",}' });
    out.push({
      name: 'follow-up with extra field',
      mode,
      body: { session_id: 's-1', text: 'x', cloud: 'aws' },
    });
    out.push({ name: 'follow-up empty text', mode, body: { session_id: 's-1', text: '' } });
    out.push({ name: 'follow-up missing text', mode, body: { session_id: 's-1' } });
    out.push({ name: 'follow-up bad id', mode, body: { session_id: '../../etc', text: 'x' } });
    out.push({ name: 'follow-up id too long', mode, body: { session_id: 's'.repeat(300), text: 'x' } });
    out.push({
      name: 'follow-up unknown session',
      mode,
      body: { session_id: 's-does-not-exist', text: 'x' },
    });
    out.push({ name: 'follow-up id number', mode, body: { session_id: 7, text: 'x' } });
    out.push({ name: 'text too long', mode, body: { ...GOOD, text: 'x'.repeat(10_001) } });
    out.push({
      name: 'repository_url of 20,000 characters',
      mode,
      body: { ...GOOD, repository_url: `https://git.example.com/${'a'.repeat(20_000)}.git` },
    });
    out.push({ name: 'iac_path too long', mode, body: { ...GOOD, iac_path: 'a/'.repeat(300) } });
    out.push({ name: 'scope_id too long', mode, body: { ...GOOD, scope_id: 'x'.repeat(257) } });
  }
  out.push({ name: 'unknown mode', mode: 'sideways', body: GOOD });
  return out;
}

describe('malformed requests', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let url: string;
  let token: string;
  let org: string;

  beforeAll(async () => {
    h = await temporalHarness('malformed');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    const created = await testUser(db, {
      name: `devops-malformed-${Date.now()}`,
      role: 'devops',
      organization: `malformed-${Date.now()}`,
    });
    token = created.token;
    org = created.user.organization_uuid;
    api = await startTestApi(h, db);
    url = api.url;
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  it('answers at least 200 malformed requests with 4xx and a JSON error, and creates nothing', async () => {
    const cases = corpus();
    expect(cases.length).toBeGreaterThanOrEqual(200);
    // Sessions of this test's own organization (other files create theirs at the same time).
    const count = async () =>
      (
        await db
          .selectFrom('sessions')
          .select(db.fn.countAll().as('n'))
          .where('organization_uuid', '=', org)
          .executeTakeFirstOrThrow()
      ).n;
    const sessionsBefore = await count();
    const failures: string[] = [];
    for (const c of cases) {
      const res = await fetch(`${url}/api/v1/drift/${c.mode}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: typeof c.body === 'string' ? c.body : JSON.stringify(c.body),
      });
      const body = (await res.json()) as { error?: { code?: string; message?: string } };
      if (res.status < 400 || res.status >= 500 || !body.error?.code || !body.error.message) {
        failures.push(`${c.mode} ${c.name}: ${res.status} ${JSON.stringify(body)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await count()).toBe(sessionsBefore);
    expect(sessionsBefore).toBe('0');
    const started = [];
    for await (const wf of h.client.workflow.list({ query: `TaskQueue = '${h.taskQueue}'` }))
      started.push(wf.workflowId);
    expect(started).toEqual([]);
  });

  it('names the limit a body breaks, and the field a too-long string is in', async () => {
    const post = (body: string) =>
      fetch(`${url}/api/v1/drift/full`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
    const huge = await post(JSON.stringify({ ...GOOD, text: 'x'.repeat(2 * 1024 * 1024) }));
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { message: string } }).error.message).toMatch(
      /^The request body \(\d+ bytes\) is larger than the 1048576-byte limit; nothing was done\.$/,
    );
    const long = await post(
      JSON.stringify({ ...GOOD, repository_url: `https://git.example.com/${'a'.repeat(20_000)}.git` }),
    );
    expect(long.status).toBe(400);
    expect(await long.json()).toEqual({
      error: {
        code: 'invalid_request',
        message: 'repository_url: must be at most 2048 characters',
        field: 'repository_url',
      },
    });
  });

  it('names the field at fault', async () => {
    const res = await fetch(`${url}/api/v1/drift/partial`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...GOOD, repository_url: 'https://user:pw@github.com/a/b.git' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        code: 'invalid_request',
        message: 'repository_url: must not carry a password or token',
        field: 'repository_url',
      },
    });
  });

  it('refuses a lock reason over 500 characters with a 400 naming the field, and locks nothing', async () => {
    const admin = await testUser(db, {
      name: `admin-malformed-${Date.now()}`,
      role: 'admin',
      organization: `malformed-admin-${Date.now()}`,
    });
    await db
      .insertInto('sessions')
      .values({
        session_id: `s-lock-${Date.now()}`,
        organization_uuid: admin.user.organization_uuid,
        created_by: admin.user.user_uuid,
        repository_url: GOOD.repository_url,
        cloud: 'aws',
        scope_id: 'x',
        iac_path: '',
        state_project_id: 'x',
        branch: 'kumoss/x',
        in_flight: null,
      })
      .execute();
    const row = await db
      .selectFrom('sessions')
      .select('session_id')
      .where('organization_uuid', '=', admin.user.organization_uuid)
      .executeTakeFirstOrThrow();
    const res = await fetch(`${url}/api/v1/admin/sessions/${row.session_id}/lock`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'x'.repeat(501) }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe('reason');
    const locks = await db
      .selectFrom('session_locks')
      .selectAll()
      .where('session_id', '=', row.session_id)
      .execute();
    expect(locks).toEqual([]);
  });
});
