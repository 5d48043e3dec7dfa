// Benchmark (issue 4): the 202 drift route and the session detail under autocannon, side by side
// with a bare Express handler in the same run; and the delay from a state change in a round to
// its server-sent event (p50/p95; target p95 ≤ 150 ms), broken down by segment (bench/event-path.ts).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import autocannon from 'autocannon';
import express from 'express';
import { randomUUID } from 'node:crypto';
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { startEventsHub } from '../api/events-hub';
import { createSessionStoreActivities } from '../activities/session-store';
import type { SessionSettings } from '../shared/contracts';
import { driftRoundWorkflowId, sessionBranch, sessionWorkflowId } from '../shared/ids';
import { operationUpdate, SESSION_WORKFLOW_TYPE } from '../shared/messages';
import { createWorker } from '../worker/worker';
import type { Activities } from '../activities';
import { createApp } from '../api/app';
import { createDb, migrate } from '../shared/infra/db';
import { createUser } from '../shared/infra/db/users';
import { ensureGitConnection } from '../shared/infra/db/git-connections';
import { quietKnownWarnings } from '../shared/infra/logger';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStackProcess } from '../test/support/test-stack';
import { breakdownLine, eventPathBreakdown, type Delivery } from './event-path';
import { takeSseEvents } from './sse';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
// The 202 load's rounds land on a queue without their activities (below): each attempt is the
// SDK's "not registered" error, expected here and left out of the output.
const sdkLog = new DefaultLogger('ERROR');
Runtime.install({
  logger: new DefaultLogger('ERROR', (entry) => {
    if (!`${entry.message} ${String(entry.meta?.error)}`.includes('is not registered on this Worker'))
      sdkLog.log(entry.level, entry.message, entry.meta);
  }),
});
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function cannon(title: string, opts: autocannon.Options): Promise<autocannon.Result> {
  const r = await autocannon({ connections: 10, duration: SECONDS, ...opts });
  const bad = r.non2xx + r.errors + r.timeouts;
  console.log(
    `${title.padEnd(34)} p50 ${String(r.latency.p50).padStart(4)} ms  p99 ${String(r.latency.p99).padStart(4)} ms  ${r.requests.average.toFixed(0).padStart(6)} req/s${bad ? `  (${bad} not 2xx)` : ''}`,
  );
  return r;
}

/** update-with-start of new sessions, `concurrency` at a time for `seconds`: latency percentiles. */
async function bareUpdateWithStart(client: Client, taskQueue: string, seconds: number, concurrency = 10) {
  const latencies: number[] = [];
  const until = Date.now() + seconds * 1000;
  const one = async (): Promise<void> => {
    while (Date.now() < until) {
      const id = `s-bare-${randomUUID()}`;
      const settings: SessionSettings = {
        session_id: id,
        organization_uuid: randomUUID(),
        repository_url: 'https://git.example.com/bench/bare.git',
        cloud: 'aws',
        scope_id: 'bench',
        iac_path: '',
        state_project_id: 'bench',
        branch: sessionBranch(id),
        max_drift_reports: 3,
        drift_group_operations: 8,
      };
      const t0 = performance.now();
      await client.workflow.executeUpdateWithStart(operationUpdate, {
        args: [
          {
            round_id: `r-${randomUUID().slice(0, 8)}`,
            kind: 'full',
            text: 'Reconcile everything.',
            actor_uuid: randomUUID(),
          },
        ],
        updateId: `u-${id}`,
        startWorkflowOperation: new WithStartWorkflowOperation(SESSION_WORKFLOW_TYPE, {
          workflowId: sessionWorkflowId(id),
          taskQueue,
          args: [{ settings }],
          workflowIdConflictPolicy: 'FAIL',
        }),
      });
      latencies.push(performance.now() - t0);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: concurrency }, one));
  const sorted = latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN);
  return { p50: pct(50), p99: pct(99), rps: latencies.length / ((Date.now() - started) / 1000) };
}

const { stack, stop } = await startTestStackProcess();
stopOnSignal(stop);
try {
  const db = createDb(stack.databaseUrl, { max: 8 });
  await migrate(db);
  const { token, user } = await createUser(db, {
    name: `bench-${Date.now()}`,
    role: 'devops',
    organization: 'bench',
  });
  // The organization may name repositories on the run's git host (a git connection).
  await ensureGitConnection(db, user.organization_uuid, stack.gitHostUrl, 'git');
  await ensureGitConnection(db, user.organization_uuid, 'https://git.example.com', 'git');
  const sw = await startStackWorker(stack, 'bench-api');
  const { client, git, artifacts, engine } = sw;
  // The load on the 202 route starts its sessions on a queue whose worker runs the workflows and
  // the session store, nothing else: the session accepts each first request (the update completes
  // in its first workflow task), and its round's activities are never carried out — the route is
  // what is measured, not hundreds of real rounds competing for the two cores.
  const loadNative = await NativeConnection.connect({ address: stack.temporalAddress });
  const loadWorker = await createWorker({
    connection: loadNative,
    namespace: stack.namespace,
    taskQueue: 'bench-load',
    activities: createSessionStoreActivities({ db }) as unknown as Activities,
    workflowBundlePath: stack.workflowBundlePath,
  });
  const loadRunning = loadWorker.run();
  const hub = startEventsHub(stack.databaseUrl);
  const makeApp = (taskQueue: string) =>
    createApp({
      checks: [],
      log: () => undefined,
      sessions: {
        db,
        client,
        taskQueue,
        orchestration: { max_drift_reports: 3, drift_group_operations: 8 },
        artifacts,
        presignTtlSeconds: 900, // the shipped storage.presign_ttl_seconds
        events: { pollMs: 500, maxPolls: 100_000 },
        hub,
      },
    });
  const api = await listen(makeApp('bench-api'));
  const loadApi = await listen(makeApp('bench-load'));
  const bare = express();
  bare.use(express.json());
  bare.post('/bare', (_req, res) => void res.status(202).json({ session_id: 's', round_id: 'r' }));
  bare.get('/bare', (_req, res) => void res.json({ session_id: 's', rounds: [] }));
  const bareApi = await listen(bare);

  const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git, engine });
  const body = JSON.stringify({
    repository_url: bed.repoUrl,
    cloud: 'aws',
    scope_id: 'bench',
    text: 'Reconcile everything.',
  });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

  console.log(
    `HTTP API, ${SECONDS} s per row, 10 connections, server and load generator in one process on 2 cores`,
  );
  const first = (await (
    await fetch(`${api.url}/api/v1/drift/full`, { method: 'POST', headers, body })
  ).json()) as { session_id: string };
  // The detail is read at rest: once its round has ended.
  for (;;) {
    const d = (await (await fetch(`${api.url}/api/v1/sessions/${first.session_id}`, { headers })).json()) as {
      rounds: unknown[];
      in_flight: unknown;
    };
    if (d.rounds.length > 0 && d.in_flight === null) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await cannon('bare Express GET handler', { url: `${bareApi.url}/bare`, headers });
  const detail = await cannon('GET /api/v1/sessions/{id}', {
    url: `${api.url}/api/v1/sessions/${first.session_id}`,
    headers,
  });

  await cannon('bare Express 202 handler', { url: `${bareApi.url}/bare`, method: 'POST', headers, body });
  const route = await cannon('POST /api/v1/drift/full (202)', {
    url: `${loadApi.url}/api/v1/drift/full`,
    method: 'POST',
    headers,
    body,
  });
  // Its floor: the same update-with-start of a session workflow, straight from this process's
  // Temporal client (no HTTP, no authentication, no database row), 10 at a time.
  const floor = await bareUpdateWithStart(client, 'bench-load', SECONDS);
  console.log(
    `${'bare Temporal update-with-start'.padEnd(34)} p50 ${String(floor.p50).padStart(4)} ms  p99 ${String(floor.p99).padStart(4)} ms  ${floor.rps.toFixed(0).padStart(6)} req/s`,
  );
  const startRatio = route.latency.p99 / floor.p99;
  console.log(`202 route p99 / bare update-with-start p99: ${startRatio.toFixed(2)} (target ≤ 1.5)`);
  // The load's sessions stay behind with rounds whose activities no worker here carries out: their
  // worker stops first, so its failing attempts do not share the two cores with the delay measured.
  loadWorker.shutdown();
  await loadRunning;
  // SSE delivery delay: from the moment a round's state changed (the event's own timestamp, the
  // workflow's clock) to the moment the subscriber read it.
  const fresh = (await (
    await fetch(`${api.url}/api/v1/drift/full`, { method: 'POST', headers, body })
  ).json()) as { session_id: string };
  const res = await fetch(`${api.url}/api/v1/events/subscribe/${fresh.session_id}`, {
    headers: { authorization: headers.authorization },
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const delays: number[] = [];
  const deliveries: Delivery[] = [];
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const notifies: number[] = [];
  const stopHearing = hub.onChange((id) => {
    if (id === fresh.session_id) notifies.push(Date.now());
  });
  let buffer = '';
  let rounds = 0;
  const ROUNDS = Number(process.env.BENCH_SSE_ROUNDS ?? 8);
  while (rounds < ROUNDS) {
    const { value, done } = await reader.read();
    if (done) break;
    const taken = takeSseEvents(buffer + new TextDecoder().decode(value));
    buffer = taken.rest;
    for (const { event, data } of taken.events) {
      const parsed = JSON.parse(data) as {
        at?: string;
        round_id?: string;
        seq?: number;
        status?: string;
        key?: string;
      };
      const seen = Date.now();
      if (parsed.at) delays.push(seen - Date.parse(parsed.at));
      if (parsed.at && parsed.round_id && parsed.seq)
        deliveries.push({
          roundId: parsed.round_id,
          seq: parsed.seq,
          at: Date.parse(parsed.at),
          seen,
          what: `${event ?? ''} ${parsed.status ?? parsed.key?.split('/').at(-1) ?? ''}`,
        });
      if (event === 'round_end') {
        rounds += 1;
        if (rounds < ROUNDS) {
          await fetch(`${api.url}/api/v1/drift/full`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ session_id: fresh.session_id, text: 'Reconcile everything.' }),
          });
        }
      }
    }
  }
  await reader.cancel();
  stopHearing();
  loop.disable();
  console.log(
    `event loop delay meanwhile: p50 ${(loop.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(loop.percentile(99) / 1e6).toFixed(0)} ms, max ${(loop.max / 1e6).toFixed(0)} ms`,
  );
  const path = await eventPathBreakdown(
    client,
    (roundId) => driftRoundWorkflowId(fresh.session_id, roundId),
    deliveries,
    notifies,
  );
  const sorted = [...delays].sort((a, b) => a - b);
  const pct = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
  console.log(
    `SSE delivery delay over ${delays.length} events (the stream woken by the store's NOTIFY): p50 ${pct(50)} ms, p95 ${pct(95)} ms, max ${sorted[sorted.length - 1]} ms (target p95 ≤ 150 ms)`,
  );
  console.log(`SSE delay by segment: ${breakdownLine(path)}`);
  console.log(`slowest: ${path.worst.join('; ')}`);

  // This benchmark's share of the one-line summary (issue 13; the other figures come from the others).
  console.log(
    `BENCH_API ${JSON.stringify({
      detail_rps: Math.round(detail.requests.average),
      detail_p99_ms: detail.latency.p99,
      start_p99_ratio: Math.round(startRatio * 100) / 100,
      sse_delay_p50_ms: pct(50),
      sse_delay_p95_ms: pct(95),
    })}`,
  );
  api.server.closeAllConnections();
  api.server.close();
  bareApi.server.close();
  loadApi.server.closeAllConnections();
  loadApi.server.close();
  await bed.destroy();
  await loadNative.close();
  await hub.close();
  await sw.stop();
  await db.destroy();
} finally {
  await stop();
}
