// Event-driven detection against the schedule (issue 30), side by side in one run: 20 stacks, each
// the drift test bed's root on its own bed and in its own organization (the bed's cloud ids are the
// same on every bed; an organization's endpoint finds only its own stacks). One worker, the API over
// a socket.
//   1. Via events: 50 changes to the beds' security groups, one every 1.2 s, each followed by the
//      CloudTrail event AWS documents for it, posted to the organization's endpoint: the time from
//      the change to the stack's item carrying that event (who, when, how) in the inbox.
//   2. Via the schedule: every stack on a 1-minute interval, 50 changes to the beds' config objects
//      (a stack's changes 65 s apart): the time from the change to the item showing the new value.
//   3. A burst: 1,000 events in one minute over the 20 stacks: the detections they cost (coalesced
//      per stack), the endpoint's answer times, the machine's CPU.
// Prints p50/p95 of each and `BENCH_EVENTS {json}` last. `npm run bench:events`.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { sql } from 'kysely';
import { createApp } from '../api/app';
import { StackSchedules } from '../api/schedules';
import { INGESTION_SECRET_HEADER } from '../shared/audit-events';
import { createDb, migrate } from '../shared/infra/db';
import { rotateIngestionSecret } from '../shared/infra/db/audit';
import { createStack } from '../shared/infra/db/stacks';
import { createUser } from '../shared/infra/db/users';
import { quietKnownWarnings } from '../shared/infra/logger';
import { stackScheduleId } from '../shared/stack-contracts';
import { ingressEvent } from '../test/support/audit-events';
import {
  APP_CONFIG,
  createDriftTestBed,
  SG_WEB_DEMO,
  type DriftTestBed,
} from '../test/support/drift-test-bed';
import { startStackWorker, startTestStackProcess } from '../test/support/test-stack';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const STACKS = Number(process.env.BENCH_EVENTS_STACKS ?? 20);
const CHANGES = Number(process.env.BENCH_EVENTS_CHANGES ?? 50);
const BURST = Number(process.env.BENCH_EVENTS_BURST ?? 1000);
const queue = 'bench-events';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const sec = (ms: number) => Math.round(ms / 100) / 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cpuBusy = () => cpus().reduce((a, c) => a + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0);

const { stack, stop } = await startTestStackProcess();
stopOnSignal(stop);
try {
  const db = createDb(stack.databaseUrl, { max: 8 });
  await migrate(db);
  const sw = await startStackWorker(stack, queue);
  const app = createApp({
    checks: [],
    log: () => undefined,
    sessions: {
      db,
      client: sw.client,
      taskQueue: queue,
      orchestration: { max_drift_reports: 3, drift_group_operations: 8 },
      artifacts: sw.artifacts,
      presignTtlSeconds: 300,
      events: { pollMs: 500, maxPolls: 100_000 },
    },
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const schedules = new StackSchedules(sw.client, queue);

  // 20 organizations, each with one stack on its own bed, its secret, and a first (whole) run that
  // indexes the stack's cloud ids.
  const t0 = performance.now();
  const stacks: { org: string; secret: string; stack_uuid: string; bed: DriftTestBed }[] = [];
  for (let i = 0; i < STACKS; i += 5) {
    await Promise.all(
      Array.from({ length: Math.min(5, STACKS - i) }, async (_, k) => {
        const bed = await createDriftTestBed({
          gitHostUrl: stack.gitHostUrl,
          git: sw.git,
          engine: sw.engine,
        });
        const { user } = await createUser(db, {
          name: `devops-${i + k}`,
          role: 'devops',
          organization: `bench-events-${Date.now()}-${i + k}`,
        });
        const s = await createStack(
          db,
          user.organization_uuid,
          {
            name: `stack-${i + k}`,
            repository_url: bed.repoUrl,
            cloud: 'aws',
            scope_id: 'bench',
            schedule: { interval_minutes: 24 * 60 },
          },
          user.user_uuid,
        );
        await schedules.create(s);
        const secret = await rotateIngestionSecret(db, user.organization_uuid);
        stacks.push({ org: user.organization_uuid, secret, stack_uuid: s.stack_uuid, bed });
      }),
    );
  }
  const ids = stacks.map((s) => s.stack_uuid);
  const finishedRuns = async () =>
    Number(
      (
        await db
          .selectFrom('detection_runs')
          .select(sql<number>`count(*)`.as('n'))
          .where('stack_uuid', 'in', ids)
          .where('status', '!=', 'running')
          .executeTakeFirstOrThrow()
      ).n,
    );
  await Promise.all(ids.map((id) => sw.client.schedule.getHandle(stackScheduleId(id)).trigger()));
  while ((await finishedRuns()) < STACKS) await sleep(500);
  console.log(
    `${STACKS} stacks on their own beds and organizations, first runs done, in ${sec(performance.now() - t0)} s`,
  );

  const post = async (s: (typeof stacks)[number], body: unknown) => {
    const started = performance.now();
    const r = await fetch(`${url}/api/v1/audit-events/aws/${s.org}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [INGESTION_SECRET_HEADER]: s.secret },
      body: JSON.stringify(body),
    });
    if (r.status !== 202) throw new Error(`the endpoint answered ${r.status}: ${await r.text()}`);
    return performance.now() - started;
  };
  const item = (stack_uuid: string, address: string) =>
    db
      .selectFrom('drift_items')
      .select(['audit', 'actual', 'state'])
      .where('stack_uuid', '=', stack_uuid)
      .where('address', '=', address)
      .execute();
  const waitFor = async (check: () => Promise<boolean>, limitMs: number) => {
    const until = Date.now() + limitMs;
    while (Date.now() < until) {
      if (await check()) return true;
      await sleep(100);
    }
    return false;
  };

  // 1. Via events.
  const viaEvents: number[] = [];
  let missedEvents = 0;
  await Promise.all(
    Array.from({ length: CHANGES }, async (_, k) => {
      await sleep(k * 1200);
      const s = stacks[k % STACKS] as (typeof stacks)[number];
      const changed = Date.now();
      await s.bed.api.put(SG_WEB_DEMO.id, {
        ...SG_WEB_DEMO,
        ingress: [
          ...SG_WEB_DEMO.ingress,
          { protocol: 'tcp', from_port: 9000 + k, to_port: 9000 + k, cidr_blocks: ['0.0.0.0/0'] },
        ],
      });
      const eventId = `bench-${k}`;
      await post(s, ingressEvent(eventId, SG_WEB_DEMO.id));
      const seen = await waitFor(
        async () =>
          (await item(s.stack_uuid, 'rest_object.sg_web_demo')).some(
            (r) => r.state === 'open' && (r.audit as { event_id?: string } | null)?.event_id === eventId,
          ),
        120_000,
      );
      if (seen) viaEvents.push(Date.now() - changed);
      else missedEvents++;
    }),
  );
  console.log(
    `via events: change → open item with its actor over ${viaEvents.length} changes on ${STACKS} stacks: p50 ${sec(pct(viaEvents, 50))} s, p95 ${sec(pct(viaEvents, 95))} s, max ${sec(Math.max(...viaEvents))} s${missedEvents ? ` (${missedEvents} not seen in 2 minutes)` : ''} (target p95 < 15 s)`,
  );

  // 2. Via the schedule: every stack on a 1-minute interval.
  await Promise.all(
    ids.map((id) =>
      sw.client.schedule.getHandle(stackScheduleId(id)).update((prev) => ({
        ...prev,
        spec: { intervals: [{ every: '60s' }], jitter: '0s' },
      })),
    ),
  );
  const viaSchedule: number[] = [];
  let missedSchedule = 0;
  await Promise.all(
    Array.from({ length: CHANGES }, async (_, k) => {
      const round = Math.floor(k / STACKS);
      await sleep((k % STACKS) * 3000 + round * 65_000);
      const s = stacks[k % STACKS] as (typeof stacks)[number];
      const replicas = 10 + k;
      const changed = Date.now();
      await s.bed.api.put(APP_CONFIG.id, { ...APP_CONFIG, replicas });
      const seen = await waitFor(
        async () =>
          (await item(s.stack_uuid, 'rest_object.app_config')).some(
            (r) => r.state === 'open' && JSON.stringify(r.actual ?? '').includes(String(replicas)),
          ),
        180_000,
      );
      if (seen) viaSchedule.push(Date.now() - changed);
      else missedSchedule++;
    }),
  );
  await Promise.all(
    ids.map((id) => sw.client.schedule.getHandle(stackScheduleId(id)).pause('bench: burst next')),
  );
  console.log(
    `via the schedule (1-minute interval): change → item showing it over ${viaSchedule.length} changes on ${STACKS} stacks: p50 ${sec(pct(viaSchedule, 50))} s, p95 ${sec(pct(viaSchedule, 95))} s, max ${sec(Math.max(...viaSchedule))} s${missedSchedule ? ` (${missedSchedule} not seen in 3 minutes)` : ''}`,
  );

  // 3. A burst of 1,000 events in a minute: deliveries of 10 events, spread over 60 s.
  await waitFor(async () => {
    const running = await db
      .selectFrom('detection_runs')
      .select('run_id')
      .where('stack_uuid', 'in', ids)
      .where('status', '=', 'running')
      .execute();
    return running.length === 0;
  }, 300_000);
  const runsBefore = await finishedRuns();
  const cpu0 = cpuBusy();
  const burstStart = Date.now();
  const answerMs: number[] = [];
  const deliveries = Math.ceil(BURST / 10);
  await Promise.all(
    Array.from({ length: deliveries }, async (_, d) => {
      await sleep((d * 60_000) / deliveries);
      const s = stacks[d % STACKS] as (typeof stacks)[number];
      answerMs.push(
        await post(
          s,
          Array.from({ length: 10 }, (_, e) => ingressEvent(`burst-${d}-${e}`, SG_WEB_DEMO.id)),
        ),
      );
    }),
  );
  // Every detection the burst started has finished.
  await waitFor(async () => {
    const r = await sw.client.workflow.count(`WorkflowType = 'stackEvents' AND ExecutionStatus = 'Running'`);
    const running = await db
      .selectFrom('detection_runs')
      .select('run_id')
      .where('stack_uuid', 'in', ids)
      .where('status', '=', 'running')
      .execute();
    return running.length === 0 && (r.count === 0 || Date.now() - burstStart > 70_000);
  }, 600_000);
  const burstRuns = (await finishedRuns()) - runsBefore;
  const burstS = (Date.now() - burstStart) / 1000;
  const burstCpu = (cpuBusy() - cpu0) / 1000;
  console.log(
    `burst: ${BURST} events in ${deliveries} deliveries over 60 s on ${STACKS} stacks → ${burstRuns} targeted detections (${(BURST / Math.max(1, burstRuns)).toFixed(1)} events a detection), all done ${burstS.toFixed(0)} s after the first; endpoint answers p50 ${Math.round(pct(answerMs, 50))} ms, p95 ${Math.round(pct(answerMs, 95))} ms; ${burstCpu.toFixed(0)} machine CPU-seconds`,
  );

  console.log(
    `BENCH_EVENTS ${JSON.stringify({
      event_to_item_p50_s: sec(pct(viaEvents, 50)),
      event_to_item_p95_s: sec(pct(viaEvents, 95)),
      schedule_to_item_p50_s: sec(pct(viaSchedule, 50)),
      schedule_to_item_p95_s: sec(pct(viaSchedule, 95)),
      burst_events: BURST,
      burst_detections: burstRuns,
      burst_answer_p95_ms: Math.round(pct(answerMs, 95)),
      burst_cpu_s: Math.round(burstCpu),
    })}`,
  );
  server.closeAllConnections();
  server.close();
  await Promise.all(ids.map((id) => schedules.delete(id).catch(() => undefined)));
  for (const s of stacks) await s.bed.destroy();
  await sw.stop();
  await db.destroy();
} finally {
  await stop();
}
