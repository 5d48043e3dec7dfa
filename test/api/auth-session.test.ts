// Browser sign-in over the real API: the token exchanged for an httpOnly, SameSite=Strict session
// cookie; the cookie authenticates reads and the event stream; a cookie-authenticated write needs
// the CSRF header and the API's own origin; signing out revokes the session. And the session list.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../shared/infra/db';
import { startTestApi, type TestApi, testUser } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('browser sessions (cookie sign-in) and the session list', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let token: string;

  beforeAll(async () => {
    h = await temporalHarness('auth-session');
    db = createDb(stack().databaseUrl);
    token = (
      await testUser(db, {
        name: `devops-cookie-${Date.now()}`,
        role: 'devops',
        organization: `cookie-${Date.now()}`,
      })
    ).token;
    api = await startTestApi(h, db);
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  const signIn = async (headers: Record<string, string> = { 'x-kumoss-csrf': '1' }, t = token) =>
    fetch(`${api.url}/api/v1/auth/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ token: t }),
    });

  it('exchanges a token for an httpOnly, SameSite=Strict cookie, and refuses without the CSRF header or with a bad token', async () => {
    expect((await signIn({})).status).toBe(403);
    expect((await signIn(undefined, 'kms_not-a-token')).status).toBe(401);
    const res = await signIn();
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ user: { role: 'devops' } });
    const cookie = res.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^kumoss_session=kss_[A-Za-z0-9_-]{43}; /);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toContain(token);
  });

  it('authenticates reads and the event stream with the cookie; a write needs the CSRF header and this origin; sign-out revokes it', async () => {
    const cookie = ((await signIn()).headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const get = (path: string) => fetch(`${api.url}${path}`, { headers: { cookie } });
    expect(await (await get('/api/v1/auth/me')).json()).toMatchObject({ user: { role: 'devops' } });

    const body = JSON.stringify({
      repository_url: `${stack().gitHostUrl}/cookie-missing.git`,
      cloud: 'aws',
      scope_id: 'scope',
      text: 'Reconcile everything.',
    });
    const post = (headers: Record<string, string>) =>
      fetch(`${api.url}/api/v1/drift/full`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/json', ...headers },
        body,
      });
    const noHeader = await post({});
    expect(noHeader.status).toBe(403);
    expect(((await noHeader.json()) as { error: { code: string } }).error.code).toBe('csrf');
    expect((await post({ 'x-kumoss-csrf': '1', origin: 'https://evil.example' })).status).toBe(403);
    expect((await get('/api/v1/sessions')).status).toBe(200);
    expect(((await (await get('/api/v1/sessions')).json()) as { sessions: unknown[] }).sessions).toEqual([]);
    const ok = await post({ 'x-kumoss-csrf': '1', origin: api.url });
    expect(ok.status).toBe(202);
    const sessionId = ((await ok.json()) as { session_id: string }).session_id;

    const events = await get(`/api/v1/events/subscribe/${sessionId}`);
    expect(events.status).toBe(200);
    await events.body?.cancel();

    const out = await fetch(`${api.url}/api/v1/auth/session`, {
      method: 'DELETE',
      headers: { cookie, 'x-kumoss-csrf': '1' },
    });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^kumoss_session=; /);
    const after = await get('/api/v1/auth/me');
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { message: string } }).error.message).toBe(
      'The session has ended; sign in again.',
    );
  });

  it('lists the organization’s sessions newest first, a page at a time, with the last outcome', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api.call('POST', '/api/v1/drift/full', token, {
        repository_url: `${stack().gitHostUrl}/list-${i}.git`,
        cloud: 'aws',
        scope_id: 'scope',
        text: 'Reconcile everything.',
      });
      ids.push(r.body.session_id as string);
    }
    const first = await api.call('GET', '/api/v1/sessions?limit=2', token);
    expect(first.status).toBe(200);
    const page1 = first.body.sessions as { session_id: string; last_outcome: unknown }[];
    expect(page1.map((s) => s.session_id)).toEqual([ids[2], ids[1]]);
    expect(first.body.next).toEqual(expect.any(String));
    const second = await api.call(
      'GET',
      `/api/v1/sessions?limit=2&before=${encodeURIComponent(first.body.next as string)}`,
      token,
    );
    const page2 = (second.body.sessions as { session_id: string }[]).map((s) => s.session_id);
    expect(page2.slice(0, 1)).toEqual([ids[0]]);
    expect((await api.call('GET', '/api/v1/sessions?limit=1000', token)).status).toBe(400);
  });
});
