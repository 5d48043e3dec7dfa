// Rate limits (security.rate_limits): requests with a refused credential and sign-in attempts per
// client address, audit-event deliveries per organization — past each limit a 429 with
// Retry-After and the usual error body, and nothing behind it runs. Small limits, the real API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitConfig } from '../../api/rate-limits';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { findUserByToken, type Role } from '../../shared/infra/db/users';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('rate limits', () => {
  let h: TemporalHarness;
  let db: Db;
  let tokens: Record<Role, string>;
  const apis: TestApi[] = [];

  beforeAll(async () => {
    h = await temporalHarness('rate-limits');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'rate-limits');
  });
  afterAll(async () => {
    for (const api of apis) api.close();
    await db?.destroy();
    await h?.close();
  });

  /** An API process of its own (its own counts) with these limits, the others high. */
  const api = async (limits: Partial<RateLimitConfig>) => {
    const a = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      rateLimits: {
        sign_in_per_minute: 1000,
        failed_auth_per_minute: 1000,
        ingestion_per_minute: 1000,
        ...limits,
      },
    });
    apis.push(a);
    return a;
  };

  const limited = (r: { status: number; body: Record<string, unknown>; headers: Headers }) => {
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(r.body).toMatchObject({ error: { code: 'rate_limited' } });
  };

  it('refused credentials: past the limit an address gets 429 for every request, a valid token too', async () => {
    const a = await api({ failed_auth_per_minute: 5 });
    for (let i = 0; i < 4; i++)
      expect((await a.call('GET', '/api/v1/sessions', `kms_wrong-${i}`)).status).toBe(401);
    // Requests that passed do not count: the fifth refusal is still answered.
    expect((await a.call('GET', '/api/v1/sessions', tokens.developer)).status).toBe(200);
    expect((await a.call('GET', '/api/v1/sessions', 'kms_wrong-4')).status).toBe(401);
    limited(await a.call('GET', '/api/v1/sessions', 'kms_wrong-6'));
    limited(await a.call('GET', '/api/v1/sessions', tokens.developer));
  });

  it('sign-in: past the limit an attempt is refused before the token is looked at, and no cookie is set', async () => {
    const a = await api({ sign_in_per_minute: 3 });
    const signIn = (token: string) =>
      fetch(`${a.url}/api/v1/auth/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-kumoss-csrf': '1' },
        body: JSON.stringify({ token }),
      });
    for (let i = 0; i < 3; i++) expect((await signIn(`kms_guess-${i}`)).status).toBe(401);
    const blocked = await signIn(tokens.admin);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.headers.get('set-cookie')).toBe(null);
  });

  it('audit-event deliveries: counted per organization — one organization past its limit leaves another’s alone', async () => {
    const a = await api({ ingestion_per_minute: 2 });
    const orgA = (await findUserByToken(db, tokens.devops))?.organization_uuid ?? '';
    const orgB = '00000000-0000-4000-8000-0000000000b2';
    const deliver = (org: string) =>
      a.call('POST', `/api/v1/audit-events/aws/${org}`, undefined, { detail: {} });
    for (let i = 0; i < 2; i++) expect((await deliver(orgA)).status).toBe(401);
    limited(await deliver(orgA));
    expect((await deliver(orgB)).status).toBe(401);
  });
});
