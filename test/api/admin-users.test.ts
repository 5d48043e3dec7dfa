// The admin panel's user routes: an admin creates a user of their organization with a role (the
// token shown once, only its hash stored), changes a role, revokes a token (the token and its
// browser sessions stop working at once) and issues a new one. Bad input is a 4xx that changes
// nothing; nobody changes their own account; other organizations' users are out of reach.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { randomUUID } from 'node:crypto';
import { insertSession, recordEvents } from '../../shared/infra/db/sessions';
import { hashToken } from '../../shared/infra/db/users';
import { roleTokens, signInCookie, startTestApi, type TestApi } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('admin: users of the organization', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let other: Record<'developer' | 'devops' | 'admin', string>;

  beforeAll(async () => {
    h = await temporalHarness('admin-users');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'admin-users');
    other = await roleTokens(db, 'admin-users-other');
    api = await startTestApi(h, db);
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  it('creates a user with a role, shows the token once, and the token works for that role', async () => {
    const name = `new-dev-${Date.now()}`;
    expect(
      (await api.call('POST', '/api/v1/admin/users', tokens.devops, { name, role: 'developer' })).status,
    ).toBe(403);
    const created = await api.call('POST', '/api/v1/admin/users', tokens.admin, { name, role: 'developer' });
    expect(created.status).toBe(201);
    const token = created.body.token as string;
    expect(token).toMatch(/^kms_/);
    const row = await db.selectFrom('users').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
    expect(row.token_sha256).toBe(hashToken(token));
    expect(JSON.stringify(row)).not.toContain(token);

    const me = await api.call('GET', '/api/v1/auth/me', token);
    expect(me.body.user).toMatchObject({ name, role: 'developer' });
    // Listing shows the user, never a token or its hash.
    const list = await api.call('GET', '/api/v1/admin/users', tokens.admin);
    expect((list.body.users as { name: string }[]).map((u) => u.name)).toContain(name);
    expect(JSON.stringify(list.body)).not.toMatch(/token_sha256|kms_/);

    // The same name again is a conflict; bad bodies are 400s; none adds a row (of any name they
    // carry, in any organization: other test files add users of their own meanwhile).
    const bad = [
      { name: '', role: 'developer' },
      { name: 'x y', role: 'developer' },
      { name: 'ok-name', role: 'root' },
      { name: 'ok-name', role: 'developer', organization: 'elsewhere' },
      { name: 'a'.repeat(101), role: 'developer' },
    ];
    const count = async () =>
      (
        await db
          .selectFrom('users')
          .select(db.fn.countAll<string>().as('n'))
          .where('name', 'in', [name, ...bad.map((b) => b.name)])
          .executeTakeFirstOrThrow()
      ).n;
    const before = await count();
    expect(before).toBe('1');
    expect(
      (await api.call('POST', '/api/v1/admin/users', tokens.admin, { name, role: 'developer' })).status,
    ).toBe(409);
    for (const body of bad) {
      const r = await api.call('POST', '/api/v1/admin/users', tokens.admin, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(typeof (r.body.error as { message: string }).message).toBe('string');
    }
    expect(await count()).toBe(before);
  });

  it("takes user names per organization: another organization's names are neither refused nor revealed", async () => {
    const name = `shared-name-${Date.now()}`;
    expect(
      (await api.call('POST', '/api/v1/admin/users', tokens.admin, { name, role: 'developer' })).status,
    ).toBe(201);
    // The same name in another organization is that organization's own user.
    const there = await api.call('POST', '/api/v1/admin/users', other.admin, { name, role: 'devops' });
    expect(there.status).toBe(201);
    const me = await api.call('GET', '/api/v1/auth/me', there.body.token as string);
    expect(me.body.user).toMatchObject({ name, role: 'devops' });
    // Within one organization a name is still one user.
    const again = await api.call('POST', '/api/v1/admin/users', other.admin, { name, role: 'developer' });
    expect(again.status).toBe(409);
    expect(again.body.error).toEqual({
      code: 'name_taken',
      message: `A user named ${name} already exists in your organization.`,
    });
    const rows = await db.selectFrom('users').select('organization_uuid').where('name', '=', name).execute();
    expect(new Set(rows.map((r) => r.organization_uuid)).size).toBe(2);
  });

  it('changes a role, revokes a token with its browser sessions, and issues a new one', async () => {
    const name = `rotating-${Date.now()}`;
    const created = await api.call('POST', '/api/v1/admin/users', tokens.admin, { name, role: 'developer' });
    const id = (created.body.user as { user_uuid: string }).user_uuid;
    const token = created.body.token as string;

    const promoted = await api.call('PATCH', `/api/v1/admin/users/${id}`, tokens.admin, { role: 'devops' });
    expect(promoted.status).toBe(200);
    expect(((await api.call('GET', '/api/v1/auth/me', token)).body.user as { role: string }).role).toBe(
      'devops',
    );
    expect(
      (await api.call('PATCH', `/api/v1/admin/users/${id}`, tokens.admin, { role: 'owner' })).status,
    ).toBe(400);

    // A browser session signed in with the token.
    const cookie = await signInCookie(api, token);
    const viaCookie = () => fetch(`${api.url}/api/v1/auth/me`, { headers: { cookie } }).then((r) => r.status);
    expect(await viaCookie()).toBe(200);

    const revoked = await api.call('DELETE', `/api/v1/admin/users/${id}/token`, tokens.admin);
    expect(revoked.status).toBe(200);
    expect((await api.call('GET', '/api/v1/auth/me', token)).status).toBe(401);
    expect(await viaCookie()).toBe(401);
    const listed = (await api.call('GET', '/api/v1/admin/users', tokens.admin)).body.users as {
      user_uuid: string;
      revoked_at: string | null;
    }[];
    expect(listed.find((u) => u.user_uuid === id)?.revoked_at).not.toBeNull();

    const reissued = await api.call('POST', `/api/v1/admin/users/${id}/token`, tokens.admin);
    expect(reissued.status).toBe(201);
    const fresh = reissued.body.token as string;
    expect(fresh).not.toBe(token);
    expect((await api.call('GET', '/api/v1/auth/me', fresh)).status).toBe(200);
    expect((await api.call('GET', '/api/v1/auth/me', token)).status).toBe(401);
  });

  it('ends the open event streams of a revoked token at once (the hub hears the revocation)', async () => {
    const name = `streaming-${Date.now()}`;
    const created = await api.call('POST', '/api/v1/admin/users', tokens.admin, { name, role: 'devops' });
    const id = (created.body.user as { user_uuid: string }).user_uuid;
    const token = created.body.token as string;
    const me = (await api.call('GET', '/api/v1/auth/me', token)).body.user as { organization_uuid: string };
    const sessionId = randomUUID();
    await insertSession(
      db,
      {
        session_id: sessionId,
        organization_uuid: me.organization_uuid,
        repository_url: 'https://127.0.0.1:1/revocation.git',
        cloud: 'aws',
        scope_id: 'scope-revocation',
        iac_path: '',
        created_by: id,
      },
      { max_drift_reports: 3, drift_group_operations: 8 },
    );
    // Two streams of the user, and one of another devops user of the organization on the same session.
    const opened = (t: string) =>
      fetch(`${api.url}/api/v1/events/subscribe/${sessionId}`, { headers: { authorization: `Bearer ${t}` } });
    const [mine, alsoMine, theirs] = await Promise.all([opened(token), opened(token), opened(tokens.devops)]);
    for (const r of [mine, alsoMine, theirs]) expect(r.status).toBe(200);
    // r.text() resolves only when the server ends the stream; without the revocation it would stay
    // open for max_session_events_iteration polls (hours), far past the test's timeout.
    const ending = Promise.all([mine.text(), alsoMine.text()]);

    expect((await api.call('DELETE', `/api/v1/admin/users/${id}/token`, tokens.admin)).status).toBe(200);
    const [a, b] = await ending;
    for (const text of [a, b]) {
      expect(text).toContain('event: close');
      expect(text).toContain('credentials revoked or changed');
    }
    // The other user's stream stays open: the session's next event still reaches it.
    await recordEvents(db, sessionId, [
      { source_key: 'test:after-revocation', type: 'status', data: { status: 'started' } },
    ]);
    const reader = (theirs.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let seen = '';
    while (!seen.includes('event: status')) {
      const chunk = await reader.read();
      expect(chunk.done).toBe(false);
      seen += decoder.decode(chunk.value, { stream: true });
    }
    expect(seen).not.toContain('event: close');
    await reader.cancel();
  });

  it('keeps admins off their own account and out of other organizations', async () => {
    const self = await db
      .selectFrom('users')
      .select('user_uuid')
      .where('token_sha256', '=', hashToken(tokens.admin))
      .executeTakeFirstOrThrow();
    const own = await api.call('PATCH', `/api/v1/admin/users/${self.user_uuid}`, tokens.admin, {
      role: 'developer',
    });
    expect(own.status).toBe(409);
    expect(
      (await api.call('DELETE', `/api/v1/admin/users/${self.user_uuid}/token`, tokens.admin)).status,
    ).toBe(409);
    expect(
      ((await api.call('GET', '/api/v1/auth/me', tokens.admin)).body.user as { role: string }).role,
    ).toBe('admin');

    const foreign = await db
      .selectFrom('users')
      .select('user_uuid')
      .where('token_sha256', '=', hashToken(other.developer))
      .executeTakeFirstOrThrow();
    expect(
      (await api.call('DELETE', `/api/v1/admin/users/${foreign.user_uuid}/token`, tokens.admin)).status,
    ).toBe(404);
    expect(
      (await api.call('PATCH', '/api/v1/admin/users/not-a-uuid', tokens.admin, { role: 'devops' })).status,
    ).toBe(404);
    expect((await api.call('GET', '/api/v1/auth/me', other.developer)).status).toBe(200);
  });
});
