// The role matrix, route by route: 401 without a valid token, 403 below the route's role, and the
// route's own answer at or above it (developer < devops < admin).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

type Who = 'none' | 'invalid' | 'developer' | 'devops' | 'admin';
const WHO: Who[] = ['none', 'invalid', 'developer', 'devops', 'admin'];

describe('role matrix', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let sessionId: string;
  const tokens: Partial<Record<Who, string>> = { invalid: 'kms_invalid-token' };

  beforeAll(async () => {
    h = await temporalHarness('roles');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    const org = `roles-${Date.now()}`;
    Object.assign(tokens, await roleTokens(db, org));
    api = await startTestApi(h, db);
    const r = await api.call('POST', '/api/v1/drift/full', tokens.devops, {
      repository_url: `${stack().gitHostUrl}/roles-missing.git`,
      cloud: 'aws',
      scope_id: 'scope',
      text: 'Reconcile everything.',
    });
    sessionId = r.body.session_id as string;
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  const first = {
    repository_url: 'https://git.example.com/a/b.git',
    cloud: 'aws',
    scope_id: 's',
    text: 'Resolve drift on x.',
  };
  const routes: {
    name: string;
    method: string;
    path: () => string;
    body?: unknown;
    minimum: Who;
    ok: number;
  }[] = [
    {
      name: 'drift partial',
      method: 'POST',
      path: () => '/api/v1/drift/partial',
      body: first,
      minimum: 'devops',
      ok: 202,
    },
    {
      name: 'drift full',
      method: 'POST',
      path: () => '/api/v1/drift/full',
      body: first,
      minimum: 'devops',
      ok: 202,
    },
    {
      name: 'apply',
      method: 'POST',
      path: () => `/api/v1/sessions/${sessionId}/apply`,
      minimum: 'devops',
      ok: 202,
    },
    {
      name: 'session detail',
      method: 'GET',
      path: () => `/api/v1/sessions/${sessionId}`,
      minimum: 'developer',
      ok: 200,
    },
    {
      name: 'authorize',
      method: 'POST',
      path: () => '/api/v1/auth/authorize',
      body: { repository_url: 'https://git.example.com/a/b.git', cloud: 'aws' },
      minimum: 'developer',
      ok: 200,
    },
  ];

  for (const route of routes) {
    it(`${route.name}: 401 without a valid token, 403 below ${route.minimum}, ${route.ok} from ${route.minimum} up`, async () => {
      const got: Record<string, number> = {};
      for (const who of WHO)
        got[who] = (await api.call(route.method, route.path(), tokens[who], route.body)).status;
      const rank = WHO.indexOf(route.minimum);
      const want = Object.fromEntries(
        WHO.map((who, i) => [who, who === 'none' || who === 'invalid' ? 401 : i < rank ? 403 : route.ok]),
      );
      expect(got).toEqual(want);
    });
  }

  it('gives admins the session list (from the metadata store) and the users of their organization', async () => {
    expect((await api.call('GET', '/api/v1/admin/sessions', tokens.devops)).status).toBe(403);
    // The session's repository does not exist: its round fails, and so does the session.
    let sessions: { session_id: string; status: string }[] = [];
    for (
      let i = 0;
      i < 300 && !sessions.some((x) => x.session_id === sessionId && x.status === 'FAILED');
      i++
    ) {
      sessions = (await api.call('GET', '/api/v1/admin/sessions', tokens.admin)).body
        .sessions as typeof sessions;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(sessions).toContainEqual(
      expect.objectContaining({
        session_id: sessionId,
        status: 'FAILED',
        workflow_id: `session:${sessionId}`,
      }),
    );
    const users = (await api.call('GET', '/api/v1/admin/users', tokens.admin)).body.users as Record<
      string,
      unknown
    >[];
    expect(users.map((u) => u.role).sort()).toEqual(['admin', 'developer', 'devops']);
    expect(JSON.stringify(users)).not.toMatch(/token/);
  });

  it('keeps the event stream to developers and up', async () => {
    const url = `${api.url}/api/v1/events/subscribe/${sessionId}`;
    expect((await fetch(url)).status).toBe(401);
    const res = await fetch(url, { headers: { authorization: `Bearer ${tokens.developer ?? ''}` } });
    expect(res.status).toBe(200);
    await res.body?.cancel();
  });
});
