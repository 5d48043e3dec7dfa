// The real API on a real socket for a test file, wired to its worker's task queue.
import type { TargetPolicy } from '../../shared/infra/network-targets';
import { secretBoxFromEnv } from '../../shared/infra/secret-box';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type AppDeps } from '../../api/app';
import { startEventsHub } from '../../api/events-hub';
import type { CodecRouteDeps } from '../../api/routes/codec';
import type { SessionRound } from '../../shared/contracts';
import type { Db } from '../../shared/infra/db';
import { createUser, findUserByToken, ROLES, type Role } from '../../shared/infra/db/users';
import { ensureGitConnection } from '../../shared/infra/db/git-connections';
import type { SessionsTable } from '../../shared/infra/db';
import { sessionBranch } from '../../shared/ids';
import { randomUUID } from 'node:crypto';
import type { Insertable } from 'kysely';
import { expect } from 'vitest';
import { artifactStore, stack, type TemporalHarness } from './stack';

export interface TestApi {
  url: string;
  call(
    method: string,
    path: string,
    token?: string,
    body?: unknown,
    extraHeaders?: Record<string, string>,
  ): Promise<{ status: number; body: Record<string, unknown>; location: string | null; headers: Headers }>;
  close(): void;
}

export async function startTestApi(
  h: Pick<TemporalHarness, 'client' | 'taskQueue'>,
  db: Db,
  events: { pollMs: number; maxPolls: number } = { pollMs: 100, maxPolls: 600 },
  authz: { enabled: boolean; url: string } = { enabled: false, url: '' },
  mapping: { enabled: boolean; url: string } = { enabled: false, url: '' },
  codec?: CodecRouteDeps,
  webDist?: string,
  extra: Pick<AppDeps, 'requestLog' | 'metrics' | 'rateLimits' | 'temporalUiUrl'> & {
    /** Session settings new sessions take (the configuration's `orchestration.*`). */
    orchestration?: { max_repair_cycles?: number; apply_requires_approval?: boolean };
    /** Private targets allowed (default: loopback, where the test's git hosts and receivers are). */
    targets?: TargetPolicy;
    /** Google's token-signing certificates: a loopback double (services.google_oidc.certs_url). */
    googleCertsUrl?: string;
  } = {},
): Promise<TestApi> {
  const { orchestration, targets, googleCertsUrl, ...appExtra } = extra;
  // The test process's KUMOSS_SECRETS_KEY (the test stack sets one), as the worker reads it.
  const secrets = secretBoxFromEnv();
  // Every test API listens for the store's notifications, as the API process does.
  const hub = startEventsHub(stack().databaseUrl);
  const app = createApp({
    ...appExtra,
    ...(webDist ? { webDist, artifactOrigin: stack().s3Endpoint } : {}),
    checks: [],
    checkResponses: true,
    authz,
    mapping,
    ...(codec ? { codec } : {}),
    log: (err) => console.error(err),
    sessions: {
      db,
      client: h.client,
      taskQueue: h.taskQueue,
      targets: targets ?? { allowed: ['127.0.0.1'] },
      ...(secrets ? { secrets } : {}),
      ...(googleCertsUrl ? { googleCertsUrl } : {}),
      orchestration: { max_drift_reports: 3, drift_group_operations: 8, ...orchestration },
      artifacts: artifactStore(),
      presignTtlSeconds: 60,
      events,
      hub,
    },
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    async call(method, path, token, body, extraHeaders = {}) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: {
          ...extraHeaders,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      // A 204 has no body; every other answer of the API is JSON.
      const text = await res.text();
      return {
        status: res.status,
        body: (res.status === 204 && text === '' ? {} : JSON.parse(text)) as Record<string, unknown>,
        location: res.headers.get('location'),
        headers: res.headers,
      };
    },
    close: () => {
      server.closeAllConnections();
      server.close();
      void hub.close();
    },
  };
}

/** Polls the session detail until it has `rounds` rounds and nothing in flight. */
export async function waitForSession(
  api: TestApi,
  token: string,
  sessionId: string,
  rounds: number,
): Promise<{ status: string; rounds: SessionRound[]; in_flight: unknown } & Record<string, unknown>> {
  for (let i = 0; i < 300; i++) {
    const r = await api.call('GET', `/api/v1/sessions/${sessionId}`, token);
    const d = r.body as { status: string; rounds: SessionRound[]; in_flight: unknown } & Record<
      string,
      unknown
    >;
    if (r.status === 200 && d.rounds.length >= rounds && !d.in_flight) return d;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(`session ${sessionId} did not settle with ${rounds} round(s)`);
}

/** A POST the API answers `202` and accepts: the session and the round it started. */
export async function postAccepted(
  api: TestApi,
  token: string,
  path: string,
  body?: unknown,
): Promise<{ session_id: string; round_id: string }> {
  const r = await api.call('POST', path, token, body);
  expect(r.status).toBe(202);
  expect(r.body.accepted).toBe(true);
  return r.body as { session_id: string; round_id: string };
}

/** A developer, a devops and an admin in a fresh organization; their tokens by role. */
/** Signs a browser in with `token` as the web application does; the session cookie (`name=value`). */
export async function signInCookie(api: TestApi, token: string): Promise<string> {
  const signIn = await fetch(`${api.url}/api/v1/auth/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-kumoss-csrf': '1' },
    body: JSON.stringify({ token }),
  });
  expect(signIn.status).toBe(201);
  return (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
}

export async function roleTokens(db: Db, prefix: string): Promise<Record<Role, string>> {
  const org = `${prefix}-${Date.now()}`;
  const tokens = {} as Record<Role, string>;
  for (const role of ROLES)
    tokens[role] = (await testUser(db, { name: `${role}-${org}`, role, organization: org })).token;
  return tokens;
}

/**
 * A user in `organization` (created when new), whose organization has the run's git host as a git
 * connection, as an admin registers the hosts its repositories live on — and `git.example.com`,
 * where the route tests name repositories nothing ever fetches.
 */
export async function testUser(
  db: Db,
  opts: { name: string; role: Role; organization: string },
): Promise<Awaited<ReturnType<typeof createUser>>> {
  const created = await createUser(db, opts);
  await ensureGitConnection(db, created.user.organization_uuid, stack().gitHostUrl, 'git');
  await ensureGitConnection(db, created.user.organization_uuid, 'https://git.example.com', 'git');
  return created;
}

/** Polls GET /api/workflows/{id} until the run is no longer RUNNING; `seen` gets every answer. */
export async function waitForWorkflow(
  api: TestApi,
  token: string,
  id: string,
  seen: (status: number, body: Record<string, unknown>) => void = () => undefined,
): Promise<Record<string, unknown>> {
  for (let i = 0; i < 300; i++) {
    const r = await api.call('GET', `/api/workflows/${id}`, token);
    seen(r.status, r.body);
    if (r.status !== 200) throw new Error(`GET /api/workflows/${id}: ${r.status} ${JSON.stringify(r.body)}`);
    if (r.body.status !== 'RUNNING') return r.body;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`workflow ${id} still running`);
}

/**
 * A session row of the user of `token` with no workflow behind it, for routes that read or guard
 * the store (detail, approval, apply's preconditions); `fields` override the defaults.
 */
export async function insertSessionRow(
  db: Db,
  token: string,
  fields: Partial<Insertable<SessionsTable>> = {},
): Promise<{ sessionId: string; user: NonNullable<Awaited<ReturnType<typeof findUserByToken>>> }> {
  const user = await findUserByToken(db, token);
  if (!user) throw new Error('no user for that token');
  const sessionId = fields.session_id ?? `s-row-${randomUUID().slice(0, 8)}`;
  await db
    .insertInto('sessions')
    .values({
      session_id: sessionId,
      organization_uuid: user.organization_uuid,
      created_by: user.user_uuid,
      repository_url: 'https://git.example.com/a/b.git',
      cloud: 'aws',
      scope_id: 's',
      iac_path: '',
      state_project_id: 'sp',
      branch: sessionBranch(sessionId),
      in_flight: null,
      ...fields,
    })
    .execute();
  return { sessionId, user };
}
