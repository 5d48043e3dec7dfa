// Scale-out on one machine, on the cluster tier: three worker processes and two API processes on
// one task queue; 30 sessions started through the two APIs in turn, each a full round on its own
// branch of one drifted root. One worker and one API process are killed with SIGKILL mid-run:
// every round still completes with the right report, no branch has a cycle committed twice, and
// an event stream on API 1 for a session started through API 2 gets every event of its round.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../shared/infra/db';
import { eventsAfter } from '../../shared/infra/db/sessions';
import { driftReportSchema } from '../../shared/drift-report';
import { sessionBranch } from '../../shared/ids';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import { apiProcess, killHard, workerProcess, type ApiProcess } from '../support/processes';
import { subscribe, type Received } from '../support/sse';
import { artifactStore, gitClient, newTestBed, stack } from '../support/stack';
import { testUser } from '../support/api';

const WORKERS = 3;
const SESSIONS = 30;
const ENDED = ['completed', 'uncompleted', 'failed'];

interface Detail {
  rounds: { status: string; outcome?: string; report_key?: string; failure_reason?: string }[];
  in_flight: unknown;
}

describe('three workers and two API processes on one task queue', () => {
  const queue = `scale-${randomUUID().slice(0, 8)}`;
  let workers: ChildProcess[] = [];
  let apis: ApiProcess[] = [];
  let db: Db;
  let token: string;
  let bed: DriftTestBed;

  beforeAll(async () => {
    // A worker found dead is noticed after 5 s without heartbeats, not the default minute.
    const env = { KUMOSS_ACTIVITY_HEARTBEAT_SECONDS: '5' };
    [workers, apis, bed] = await Promise.all([
      Promise.all(Array.from({ length: WORKERS }, () => workerProcess(queue))),
      Promise.all([apiProcess(queue, env), apiProcess(queue, env)]),
      newTestBed(),
    ]);
    db = createDb(stack().databaseUrl, { max: 2 });
    ({ token } = await testUser(db, {
      name: `scale-${Date.now()}`,
      role: 'devops',
      organization: 'scale',
    }));
    await bed.inject('attribute');
    await bed.inject('ingress');
  });
  afterAll(async () => {
    await Promise.all([...workers, ...apis.map((a) => a.child)].map((c) => killHard(c)));
    await bed?.destroy();
    await db?.destroy();
  });

  const call = async (api: ApiProcess, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  it('completes 30 sessions with the right reports through a worker and an API process killed mid-run', async () => {
    const [api1, api2] = apis as [ApiProcess, ApiProcess];
    const sessions: string[] = [];
    let watched: Promise<Received[]> | undefined;
    for (let i = 0; i < SESSIONS; i++) {
      const api = i % 2 === 0 ? api1 : api2;
      const r = await call(api, 'POST', '/api/v1/drift/full', {
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-scale',
        text: 'Reconcile everything.',
      });
      expect(r.status).toBe(202);
      const id = r.body.session_id as string;
      sessions.push(id);
      // The second session was started through API 2: its events are read from API 1.
      if (i === 1)
        watched = subscribe(`${api1.url}/api/v1/events/subscribe/${id}`, token, {
          stop: (e) => e.event === 'round_end',
        });
    }
    const detail = async (id: string) =>
      (await call(api1, 'GET', `/api/v1/sessions/${id}`)).body as unknown as Detail;

    // Mid-run: some rounds generating or validating (their last status in the session log).
    const lastStatus = async (id: string) =>
      (await eventsAfter(db, id, 0)).filter((e) => e.type === 'status').at(-1)?.data.status;
    await expect
      .poll(
        async () => {
          const statuses = await Promise.all(sessions.map(lastStatus));
          return statuses.filter((s) => s === 'generating' || s === 'validating').length;
        },
        { timeout: 120_000, interval: 250 },
      )
      .toBeGreaterThanOrEqual(3);
    await Promise.all([killHard(workers[0]!), killHard(api2.child)]);

    // Every round ends, seen through the API that is left.
    await expect
      .poll(
        async () => {
          const ds = await Promise.all(sessions.map(detail));
          return ds.filter((d) => ENDED.includes(d.rounds[0]?.status ?? '') && d.in_flight === null).length;
        },
        { timeout: 480_000, interval: 1000 },
      )
      .toBe(SESSIONS);

    const bare = join(stack().gitReposDir, new URL(bed.repoUrl).pathname.slice(1));
    const rounds = await Promise.all(sessions.map(async (id) => ({ id, ...(await detail(id)).rounds[0]! })));
    // Every round, named when it is not right (with why it failed).
    expect(
      rounds
        .filter((r) => r.status !== 'completed' || r.outcome !== 'Succeeded')
        .map((r) => `${r.id}: ${r.status} ${r.outcome ?? ''} ${r.failure_reason ?? ''}`),
    ).toEqual([]);
    for (const round of rounds) {
      const id = round.id;
      const report = driftReportSchema.parse(JSON.parse(await artifactStore().getText(round.report_key!)));
      expect(report.remediated_resources.map((r) => r.address)).toEqual([
        DRIFT_ADDRESSES.attribute,
        DRIFT_ADDRESSES.ingress,
      ]);
      // One cycle, committed once.
      const log = await gitClient().run(['log', '--format=%B%x00', `main..${sessionBranch(id)}`], bare);
      const markers = log.split('\n').filter((l) => l.startsWith('Kumoss-Cycle: '));
      expect(markers).toHaveLength(1);
    }

    // The stream on API 1 for the session started through API 2 saw every event of its round: what
    // a fresh subscription reads from the log afterwards, id for id.
    const live = await watched!;
    const replay = await subscribe(`${api1.url}/api/v1/events/subscribe/${sessions[1]}`, token, {
      stop: (e) => e.event === 'round_end',
    });
    expect(live.map((e) => [e.id, e.event])).toEqual(replay.map((e) => [e.id, e.event]));
    expect(live.at(-1)).toMatchObject({
      event: 'round_end',
      data: { status: 'completed', outcome: 'Succeeded' },
    });
  }, 600_000);
});
