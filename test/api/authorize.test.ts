// The authorization preflight: off by default (authorized, nothing contacted); on, it asks the
// sidecar with cloud, project and environment — never the scope id.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { insertSessionRow, roleTokens, startTestApi, type TestApi, testUser } from '../support/api';
import { randomUUID } from 'node:crypto';
import { findUserByToken } from '../../shared/infra/db/users';
import { createRunnerGroup, getRunnerSchedule, listRunnerGroups } from '../../shared/infra/db/runners';
import { awsEnvironment } from '../support/runner-bed';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('POST /api/v1/auth/authorize', () => {
  let h: TemporalHarness;
  let db: Db;
  let token: string;
  let sidecar: Server;
  let sidecarUrl: string;
  const seen: unknown[] = [];

  beforeAll(async () => {
    h = await temporalHarness('authorize');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    token = (
      await testUser(db, { name: `dev-authz-${Date.now()}`, role: 'developer', organization: 'authz' })
    ).token;
    sidecar = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const q = JSON.parse(body) as { environment: string; project: string };
        seen.push({ path: req.url, ...q });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            q.environment === 'envs/prod' || q.project.startsWith('runner-group:closed-')
              ? { authorized: false, reason: 'prod is closed' }
              : { authorized: true },
          ),
        );
      });
    });
    await new Promise<void>((r) => sidecar.listen(0, '127.0.0.1', () => r()));
    sidecarUrl = `http://127.0.0.1:${(sidecar.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    sidecar?.close();
    await db?.destroy();
    await h?.close();
  });

  const request = {
    repository_url: 'https://git.example.com/team/infra.git',
    cloud: 'gcp',
    iac_path: 'envs/dev',
    scope_id: 'my-gcp-project-123',
  };

  it('answers authorized without contacting anything when the sidecar is disabled', async () => {
    const api: TestApi = await startTestApi(h, db, undefined, { enabled: false, url: sidecarUrl });
    try {
      const r = await api.call('POST', '/api/v1/auth/authorize', token, request);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ authorized: true, checked: false });
      expect(seen).toEqual([]);
    } finally {
      api.close();
    }
  });

  it('asks the sidecar with cloud, project and environment and who asks, never the scope id', async () => {
    const api = await startTestApi(h, db, undefined, { enabled: true, url: sidecarUrl });
    const me = await findUserByToken(db, token);
    try {
      const ok = await api.call('POST', '/api/v1/auth/authorize', token, request);
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ authorized: true, checked: true });
      expect(seen).toEqual([
        {
          path: '/authorize',
          cloud: 'gcp',
          project: 'https://git.example.com/team/infra.git',
          environment: 'envs/dev',
          organization: me?.organization_uuid,
          user: me?.user_uuid,
          user_name: me?.name,
          role: 'developer',
          operation: 'preflight',
        },
      ]);
      expect(JSON.stringify(seen)).not.toContain('my-gcp-project-123');
      const no = await api.call('POST', '/api/v1/auth/authorize', token, {
        ...request,
        iac_path: 'envs/prod',
      });
      expect(no.status).toBe(403);
      expect(no.body).toEqual({ authorized: false, checked: true, reason: 'prod is closed' });
      expect(
        (await api.call('POST', '/api/v1/auth/authorize', token, { ...request, cloud: 'mars' })).status,
      ).toBe(400);
      expect((await api.call('POST', '/api/v1/auth/authorize', undefined, request)).status).toBe(401);
    } finally {
      api.close();
    }
  });

  it('is asked by every route that starts work: a refused repository gets 403 and nothing starts', async () => {
    const tokens = await roleTokens(db, 'authz-work');
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no user');
    const api = await startTestApi(h, db, undefined, { enabled: true, url: sidecarUrl });
    const prod = { ...request, iac_path: 'envs/prod' };
    const refused = (r: { status: number; body: Record<string, unknown> }) => {
      expect(r.status).toBe(403);
      expect(r.body.error).toEqual({
        code: 'not_authorized',
        message:
          'The authorization service refused work on https://git.example.com/team/infra.git (envs/prod): prod is closed',
      });
    };
    try {
      seen.length = 0;
      refused(await api.call('POST', '/api/v1/drift/full', tokens.devops, { ...prod, text: 'Reconcile.' }));
      refused(await api.call('POST', '/api/v1/generate', tokens.devops, { ...prod, text: 'Add a tag.' }));
      refused(
        await api.call('POST', '/api/v1/stacks', tokens.devops, {
          name: `refused-${Date.now()}`,
          ...prod,
          schedule: { interval_minutes: 60 },
        }),
      );
      // A session opened before the sidecar said no: its follow-ups and its apply are refused too.
      const { sessionId } = await insertSessionRow(db, tokens.devops, {
        repository_url: prod.repository_url,
        cloud: 'gcp',
        scope_id: prod.scope_id,
        iac_path: prod.iac_path,
      });
      refused(await api.call('POST', `/api/v1/sessions/${sessionId}/apply`, tokens.devops));
      refused(
        await api.call('POST', '/api/v1/drift/partial', tokens.devops, {
          session_id: sessionId,
          text: 'Again.',
        }),
      );
      // Nothing was created; the sidecar was asked each time, never with the scope id.
      const sessions = await db
        .selectFrom('sessions')
        .select('session_id')
        .where('organization_uuid', '=', devops.organization_uuid)
        .execute();
      expect(sessions.map((r) => r.session_id)).toEqual([sessionId]);
      const stacks = await db
        .selectFrom('stacks')
        .select('stack_uuid')
        .where('organization_uuid', '=', devops.organization_uuid)
        .execute();
      expect(stacks).toEqual([]);
      expect(seen).toHaveLength(5);
      expect(JSON.stringify(seen)).not.toContain(prod.scope_id);
    } finally {
      api.close();
    }
  });

  it('is asked by every route that changes work — stack change, pause, resume, pull request, merge, approval — with who asks; each refused changes nothing', async () => {
    const tokens = await roleTokens(db, 'authz-change');
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no user');
    const api = await startTestApi(h, db, undefined, { enabled: true, url: sidecarUrl });
    const dev = { ...request, repository_url: `${stack().gitHostUrl}/team/authz-change.git` };
    const refused = (r: { status: number; body: Record<string, unknown> }) => {
      expect(r.status).toBe(403);
      expect((r.body.error as { code: string }).code).toBe('not_authorized');
    };
    try {
      const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
        name: `authz-change-${Date.now()}`,
        ...dev,
        schedule: { interval_minutes: 60 },
      });
      expect(created.status).toBe(201);
      const stackId = created.body.stack_uuid as string;
      seen.length = 0;
      // Moving the stack to a path the sidecar refuses: refused, the stack unchanged.
      refused(await api.call('PATCH', `/api/v1/stacks/${stackId}`, tokens.devops, { iac_path: 'envs/prod' }));
      const after = await api.call('GET', `/api/v1/stacks/${stackId}`, tokens.devops);
      expect(after.body.iac_path).toBe('envs/dev');
      // A session and a stack whose target is refused now (opened before the sidecar said no).
      const { sessionId } = await insertSessionRow(db, tokens.devops, {
        repository_url: dev.repository_url,
        cloud: 'gcp',
        scope_id: dev.scope_id,
        iac_path: 'envs/prod',
      });
      await db
        .updateTable('stacks')
        .set({ iac_path: 'envs/prod' })
        .where('stack_uuid', '=', stackId)
        .execute();
      refused(await api.call('POST', `/api/v1/stacks/${stackId}/pause`, tokens.devops, {}));
      refused(await api.call('POST', `/api/v1/stacks/${stackId}/resume`, tokens.devops, {}));
      refused(await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, tokens.devops));
      refused(await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, tokens.devops));
      refused(await api.call('POST', `/api/v1/sessions/${sessionId}/approve`, tokens.admin));
      const asked = seen as { operation: string; organization: string; role: string; environment: string }[];
      expect(asked.filter((q) => q.environment === 'envs/prod').map((q) => [q.operation, q.role])).toEqual([
        ['stacks.update', 'devops'],
        ['stacks.pause', 'devops'],
        ['stacks.resume', 'devops'],
        ['pull_request.open', 'devops'],
        ['pull_request.merge', 'devops'],
        ['sessions.approve', 'admin'],
      ]);
      expect(new Set(asked.map((q) => q.organization))).toEqual(new Set([devops.organization_uuid]));
      expect(JSON.stringify(seen)).not.toContain(dev.scope_id);
      // Nothing changed: no pull request, no approval, the schedule not paused.
      expect(
        await db
          .selectFrom('pull_requests')
          .select('session_id')
          .where('session_id', '=', sessionId)
          .execute(),
      ).toEqual([]);
      expect((await api.call('GET', `/api/v1/stacks/${stackId}`, tokens.devops)).body).toMatchObject({
        schedule_state: expect.objectContaining({ paused: false }) as unknown,
      });
    } finally {
      api.close();
    }
  });

  it('is asked by every runner route that starts or changes work — group create and change, DAG start, schedule set, pause, resume, trigger, removal — with the group as the project; each refused changes nothing', async () => {
    const tokens = await roleTokens(db, 'authz-runner');
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no user');
    const api = await startTestApi(h, db, undefined, { enabled: true, url: sidecarUrl });
    const refused = (r: { status: number; body: Record<string, unknown> }) => {
      expect(r.status, JSON.stringify(r.body)).toBe(403);
      expect((r.body.error as { code: string }).code).toBe('not_authorized');
    };
    const suffix = randomUUID().slice(0, 8);
    try {
      seen.length = 0;
      refused(
        await api.call('POST', '/api/v1/runner-groups', tokens.devops, {
          name: `closed-${suffix}`,
          environment: awsEnvironment(),
        }),
      );
      expect((await listRunnerGroups(db, devops.organization_uuid)).map((g) => g.name)).toEqual([]);
      const open = await api.call('POST', '/api/v1/runner-groups', tokens.devops, {
        name: `open-${suffix}`,
        environment: awsEnvironment(),
      });
      expect(open.status).toBe(201);
      const openId = open.body.runner_group_uuid as string;
      // Renaming it into a refused project: refused, the group unchanged.
      refused(
        await api.call('PUT', `/api/v1/runner-groups/${openId}`, tokens.devops, {
          name: `closed-${suffix}`,
          environment: awsEnvironment(),
        }),
      );
      expect((await api.call('GET', `/api/v1/runner-groups/${openId}`, tokens.devops)).body.name).toBe(
        `open-${suffix}`,
      );
      // A group whose project the sidecar refuses now (registered before it said no).
      const closed = await createRunnerGroup(db, devops.organization_uuid, {
        name: `closed-${suffix}`,
        environment: awsEnvironment(),
      });
      const id = closed.runner_group_uuid;
      refused(
        await api.call('POST', '/api/workflows/start', tokens.devops, {
          workflow_type: 'runner.environment-drift-detect',
          initial_data: { runner_group_uuid: id },
        }),
      );
      refused(
        await api.call('PUT', `/api/v1/runner-groups/${id}/schedule`, tokens.devops, {
          schedule: { interval_minutes: 60 },
        }),
      );
      for (const verb of ['pause', 'resume', 'trigger'])
        refused(await api.call('POST', `/api/v1/runner-groups/${id}/schedule/${verb}`, tokens.devops, {}));
      refused(await api.call('DELETE', `/api/v1/runner-groups/${id}/schedule`, tokens.devops));
      const asked = seen as { operation: string; organization: string; project: string; cloud: string }[];
      expect(
        asked.filter((q) => q.project === `runner-group:closed-${suffix}`).map((q) => q.operation),
      ).toEqual([
        'runner_groups.create',
        'runner_groups.update',
        'runner.detect',
        'runner_schedule.put',
        'runner_schedule.pause',
        'runner_schedule.resume',
        'runner_schedule.trigger',
        'runner_schedule.delete',
      ]);
      expect(new Set(asked.map((q) => q.cloud))).toEqual(new Set(['aws']));
      expect(new Set(asked.map((q) => q.organization))).toEqual(new Set([devops.organization_uuid]));
      // Nothing started, nothing scheduled.
      expect(
        await db
          .selectFrom('runner_executions')
          .select('workflow_uuid')
          .where('runner_group_uuid', '=', id)
          .execute(),
      ).toEqual([]);
      expect(await getRunnerSchedule(db, devops.organization_uuid, id)).toBeFalsy();
    } finally {
      api.close();
    }
  });

  it('answers 503 when the sidecar does not answer', async () => {
    const api = await startTestApi(h, db, undefined, { enabled: true, url: 'http://127.0.0.1:9' });
    try {
      const r = await api.call('POST', '/api/v1/auth/authorize', token, request);
      expect(r.status).toBe(503);
      expect((r.body.error as { code: string }).code).toBe('authz_unavailable');
    } finally {
      api.close();
    }
  });
});

describe('POST /api/v1/mapping', () => {
  let h: TemporalHarness;
  let db: Db;
  let token: string;
  let sidecar: Server;
  let sidecarUrl: string;

  beforeAll(async () => {
    h = await temporalHarness('mapping');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    token = (
      await testUser(db, { name: `dev-mapping-${Date.now()}`, role: 'developer', organization: 'mapping' })
    ).token;
    sidecar = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const q = JSON.parse(body) as { repository_url: string };
        res.writeHead(200, { 'content-type': 'application/json' });
        if (q.repository_url.endsWith('/known.git'))
          res.end(JSON.stringify({ provider: 'gcp', scope_id: 'proj-123' }));
        else if (q.repository_url.endsWith('/odd.git'))
          res.end(JSON.stringify({ provider: 'heroku', scope_id: '' }));
        else res.end(JSON.stringify({ provider: null, scope_id: null }));
      });
    });
    await new Promise<void>((r) => sidecar.listen(0, '127.0.0.1', () => r()));
    sidecarUrl = `http://127.0.0.1:${(sidecar.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    sidecar?.close();
    await db?.destroy();
    await h?.close();
  });

  it('answers unsure without contacting anything when disabled', async () => {
    const api = await startTestApi(h, db, undefined, undefined, { enabled: false, url: sidecarUrl });
    try {
      const r = await api.call('POST', '/api/v1/mapping', token, {
        repository_url: 'https://g.example.com/t/known.git',
      });
      expect(r.body).toEqual({ provider: null, scope_id: null, checked: false });
    } finally {
      api.close();
    }
  });

  it('passes on what the catalogue knows, and treats anything else as unsure', async () => {
    const api = await startTestApi(h, db, undefined, undefined, { enabled: true, url: sidecarUrl });
    try {
      const known = await api.call('POST', '/api/v1/mapping', token, {
        repository_url: 'https://g.example.com/t/known.git',
      });
      expect(known.body).toEqual({ provider: 'gcp', scope_id: 'proj-123', checked: true });
      const odd = await api.call('POST', '/api/v1/mapping', token, {
        repository_url: 'https://g.example.com/t/odd.git',
      });
      expect(odd.body).toEqual({ provider: null, scope_id: null, checked: true });
      const unknown = await api.call('POST', '/api/v1/mapping', token, {
        repository_url: 'https://g.example.com/t/x.git',
      });
      expect(unknown.body).toEqual({ provider: null, scope_id: null, checked: true });
      expect(
        (await api.call('POST', '/api/v1/mapping', token, { repository_url: 'http://insecure/x.git' }))
          .status,
      ).toBe(400);
    } finally {
      api.close();
    }
  });
});
