// Sessions over the real HTTP API on a real socket: roles, 202-then-the-session-decides, apply
// without a pinned plan, the session detail with presigned artifacts, tenant isolation.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolPath } from '../../shared/infra/tools.mjs';
import { NO_PINNED_PLAN, type SessionRound } from '../../shared/contracts';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import type { DriftTestBed } from '../support/drift-test-bed';
import { roleTokens, startTestApi, waitForSession, type TestApi, testUser } from '../support/api';
import { newTestBed, stack, temporalHarness, workerLogs, type TemporalHarness } from '../support/stack';

interface Detail {
  status: string;
  state_project_id: string;
  scope_id: string;
  rounds: SessionRound[];
  in_flight: unknown;
  artifacts: { key: string; url: string }[];
}

describe('session API', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    h = await temporalHarness('sessions');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    const org = `org-${Date.now()}`;
    Object.assign(tokens, await roleTokens(db, org));
    tokens.other = (
      await testUser(db, { name: `devops-other-${org}`, role: 'devops', organization: `${org}-b` })
    ).token;
    api = await startTestApi(h, db);
    bed = await newTestBed();
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
  });

  const call = (method: string, path: string, token?: string, body?: unknown) =>
    api.call(method, path, token, body);

  const first = () => ({
    repository_url: bed.repoUrl,
    cloud: 'aws',
    scope_id: '123456789012',
    text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
  });

  const settled = async (sessionId: string, rounds: number): Promise<Detail> =>
    (await waitForSession(api, tokens.developer ?? '', sessionId, rounds)) as unknown as Detail;

  it("answers 401 without a valid token and 403 below devops, with the web application's message", async () => {
    expect((await call('POST', '/api/v1/drift/partial', undefined, first())).status).toBe(401);
    expect((await call('POST', '/api/v1/drift/partial', 'kms_not-a-token', first())).status).toBe(401);
    const dev = await call('POST', '/api/v1/drift/full', tokens.developer, first());
    expect(dev.status).toBe(403);
    expect(dev.body).toEqual({
      error: { code: 'forbidden', message: 'Requires the devops operation role.' },
    });
  });

  it('runs a partial round: 202 with the session id first, then the detail shows the round and its artifacts', async () => {
    await bed.inject('ingress');
    const accepted = await call('POST', '/api/v1/drift/partial', tokens.devops, first());
    expect(accepted.status).toBe(202);
    const sessionId = accepted.body.session_id as string;
    expect(accepted.location).toBe(`/api/v1/sessions/${sessionId}`);
    const d = await settled(sessionId, 1);
    expect(d.status).toBe('ACTIVE');
    expect(d.scope_id).toBe('123456789012');
    expect(d.state_project_id).toMatch(/^[0-9a-f]{32}$/);
    expect(d.rounds).toEqual([
      expect.objectContaining({
        round_id: accepted.body.round_id,
        kind: 'partial',
        status: 'completed',
        outcome: 'Succeeded',
      }),
    ]);
    const report = d.artifacts.find((a) => a.key.endsWith('/drift-report.json'));
    expect(report).toBeDefined();
    const fetched = await fetch(report?.url ?? '');
    expect(fetched.status).toBe(200);
    expect(((await fetched.json()) as { outcome: string }).outcome).toBe('Succeeded');

    // Another organization does not see it.
    expect((await call('GET', `/api/v1/sessions/${sessionId}`, tokens.other)).status).toBe(404);

    // Operators find the session's runs by search attribute, from the SDK and the Temporal CLI.
    const query = `KumossSessionId='${sessionId}'`;
    let found: string[] = [];
    for (let i = 0; i < 50 && found.length < 2; i++) {
      found = [];
      for await (const wf of h.client.workflow.list({ query })) found.push(wf.type);
      if (found.length < 2) await new Promise((r) => setTimeout(r, 100));
    }
    expect(found.sort()).toEqual(['driftRound', 'session']);
    const cli = execFileSync(
      toolPath('temporal'),
      ['workflow', 'list', '--address', stack().temporalAddress, '--query', query, '--output', 'json'],
      {
        encoding: 'utf8',
      },
    );
    const listed = (JSON.parse(cli) as { execution: { workflowId: string } }[])
      .map((w) => w.execution.workflowId)
      .sort();
    expect(listed).toEqual([
      `drift-round:${sessionId}:${accepted.body.round_id as string}`,
      `session:${sessionId}`,
    ]);
  });

  it('accepts a second request while one is in flight with 202, says at once that it will not start, and changes nothing', async () => {
    const a = await call('POST', '/api/v1/drift/full', tokens.devops, {
      ...first(),
      text: 'Reconcile everything.',
    });
    const sessionId = a.body.session_id as string;
    expect(a.body).toMatchObject({ accepted: true });
    const b = await call('POST', '/api/v1/drift/full', tokens.devops, {
      session_id: sessionId,
      text: 'And again.',
    });
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.body).toEqual({
      session_id: sessionId,
      round_id: b.body.round_id,
      accepted: false,
      refusal: 'SessionBusy',
      reason: `Session ${sessionId} already has an operation in flight.`,
    });
    expect(workerLogs).toContain(`Session ${sessionId} already has an operation in flight.`);
    const d = await settled(sessionId, 1);
    expect(d.rounds.map((r) => r.round_id)).toEqual([a.body.round_id]);
    // The refused round never became a round, and no workflow was started for it.
    const roundWorkflows: string[] = [];
    for await (const wf of h.client.workflow.list({ query: `KumossSessionId='${sessionId}'` })) {
      roundWorkflows.push(wf.workflowId);
    }
    expect(roundWorkflows).not.toContain(`drift-round:${sessionId}:${b.body.round_id as string}`);
    // Its refusal is in the session's event log, which the event stream relays.
    const refused = await db
      .selectFrom('session_events')
      .select(['type', 'data'])
      .where('session_id', '=', sessionId)
      .where('type', '=', 'refused')
      .execute();
    expect(refused).toEqual([
      {
        type: 'refused',
        data: expect.objectContaining({ round_id: b.body.round_id, refusal: 'SessionBusy' }) as unknown,
      },
    ]);
  });

  it('fails apply on a drift-only session with the exact message, after answering 202; the session then ends and its workflow completes', async () => {
    const a = await call('POST', '/api/v1/drift/full', tokens.devops, {
      ...first(),
      text: 'Reconcile everything.',
    });
    const sessionId = a.body.session_id as string;
    await settled(sessionId, 1);
    const apply = await call('POST', `/api/v1/sessions/${sessionId}/apply`, tokens.devops);
    expect(apply.status).toBe(202);
    expect(apply.body.accepted).toBe(true);
    const d = await settled(sessionId, 2);
    expect(d.status).toBe('FAILED');
    expect(d.rounds[1]).toMatchObject({ kind: 'apply', status: 'failed', failure_reason: NO_PINNED_PLAN });

    // The session's workflow is over: completed, not running for ever.
    const handle = h.client.workflow.getHandle(`session:${sessionId}`);
    const result = (await handle.result()) as { status: string; rounds?: unknown };
    expect(result.status).toBe('FAILED');
    expect(result).not.toHaveProperty('rounds'); // rounds live in the metadata store, not in the workflow
    expect((await handle.describe()).status.name).toBe('COMPLETED');

    const late = await call('POST', '/api/v1/drift/partial', tokens.devops, {
      session_id: sessionId,
      text: 'Resolve drift on sg-web-demo.',
    });
    expect(late.status).toBe(202);
    expect(late.body).toMatchObject({
      accepted: false,
      refusal: 'SessionFinished',
      reason: `Session ${sessionId} is finished and cannot be resumed.`,
    });
    const after = await settled(sessionId, 2);
    expect(after.rounds).toHaveLength(2);
    expect(after.status).toBe('FAILED');
    // Nothing was started for it: the closed session workflow is still the only run of its id.
    const runs: string[] = [];
    for await (const wf of h.client.workflow.list({ query: `WorkflowId='session:${sessionId}'` })) {
      runs.push(wf.status.name);
    }
    expect(runs).toEqual(['COMPLETED']);
  });

  it('answers the session detail and its whole event stream from the metadata store once the workflows are gone', async () => {
    const a = await call('POST', '/api/v1/drift/full', tokens.devops, {
      ...first(),
      text: 'Reconcile everything.',
    });
    const sessionId = a.body.session_id as string;
    await settled(sessionId, 1);
    await call('POST', `/api/v1/sessions/${sessionId}/apply`, tokens.devops);
    await h.client.workflow.getHandle(`session:${sessionId}`).result();
    const before = await settled(sessionId, 2);
    // What retention would do: the closed runs disappear from Temporal.
    for (const workflowId of [
      `session:${sessionId}`,
      `drift-round:${sessionId}:${a.body.round_id as string}`,
    ]) {
      await h.client.workflowService.deleteWorkflowExecution({
        namespace: h.client.options.namespace,
        workflowExecution: { workflowId },
      });
    }
    await expect
      .poll(
        () =>
          h.client.workflow
            .getHandle(`session:${sessionId}`)
            .describe()
            .then(
              () => 'still there',
              () => 'gone',
            ),
        // The server deletes asynchronously.
        { timeout: 90_000, interval: 250 },
      )
      .toBe('gone');
    // The same detail (presigned URLs are signed anew on every read).
    const keysOf = (d: Detail) => d.artifacts.map((x) => x.key);
    const gone = await settled(sessionId, 2);
    // (Presigned URLs are reused until shortly before they expire: only their count-down differs.)
    const same = (d: Detail) => ({ ...d, artifacts: keysOf(d), artifacts_expire_in_seconds: undefined });
    expect(same(gone)).toEqual(same(before));
    const res = await fetch(`${api.url}/api/v1/events/subscribe/${sessionId}`, {
      headers: { authorization: `Bearer ${tokens.developer ?? ''}` },
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!/event: round_end[\s\S]*event: round_end/.test(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(events[0]).toBe('round');
    expect(events).toContain('report');
    expect(events.filter((e) => e === 'round_end')).toHaveLength(2);
  });

  it('answers 404 for a session that does not exist', async () => {
    const r = await call('POST', '/api/v1/drift/full', tokens.devops, { session_id: 's-missing', text: 'x' });
    expect(r.status).toBe(404);
    expect((await call('GET', '/api/v1/sessions/s-missing', tokens.admin)).status).toBe(404);
  });
});
