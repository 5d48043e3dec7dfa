// Benchmark (issue 4): the 202 drift route and the session detail under autocannon, side by side
// with a bare Express handler in the same run; and the delay from a state change in a round to
// its server-sent event (p50/p95; target p95 < 1 s).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createApp } from '../api/app';
import { createDb, migrate } from '../shared/db';
import { createUser } from '../shared/db/users';
import { quietKnownWarnings } from '../shared/logger';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStack } from '../test/support/test-stack';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function cannon(title: string, opts: autocannon.Options) {
  const r = await autocannon({ connections: 10, duration: SECONDS, ...opts });
  const bad = r.non2xx + r.errors + r.timeouts;
  console.log(
    `${title.padEnd(34)} p50 ${String(r.latency.p50).padStart(4)} ms  p99 ${String(r.latency.p99).padStart(4)} ms  ${r.requests.average.toFixed(0).padStart(6)} req/s${bad ? `  (${bad} not 2xx)` : ''}`,
  );
}

const { stack, stop } = await startTestStack();
try {
  const db = createDb(stack.databaseUrl, { max: 8 });
  await migrate(db);
  const { token } = await createUser(db, {
    name: `bench-${Date.now()}`,
    role: 'devops',
    organization: 'bench',
  });
  const sw = await startStackWorker(stack, 'bench-api');
  const { client, git, artifacts, engine } = sw;
  // The load on the 202 route starts its sessions on a queue no worker polls: the route is what
  // is measured, not hundreds of real rounds competing for the two cores.
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
        presignTtlSeconds: 60,
        events: { pollMs: 500, maxPolls: 100_000 },
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
  await cannon('bare Express 202 handler', { url: `${bareApi.url}/bare`, method: 'POST', headers, body });
  await cannon('POST /api/v1/drift/full (202)', {
    url: `${loadApi.url}/api/v1/drift/full`,
    method: 'POST',
    headers,
    body,
  });
  const first = (await (
    await fetch(`${api.url}/api/v1/drift/full`, { method: 'POST', headers, body })
  ).json()) as { session_id: string };
  await new Promise((r) => setTimeout(r, 5000)); // let its round finish: the detail is read at rest
  await cannon('bare Express GET handler', { url: `${bareApi.url}/bare`, headers });
  await cannon('GET /api/v1/sessions/{id}', {
    url: `${api.url}/api/v1/sessions/${first.session_id}`,
    headers,
  });

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
  let buffer = '';
  let rounds = 0;
  const ROUNDS = Number(process.env.BENCH_SSE_ROUNDS ?? 4);
  while (rounds < ROUNDS) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += new TextDecoder().decode(value);
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = /^data: (.*)$/m.exec(block)?.[1];
      const event = /^event: (.*)$/m.exec(block)?.[1];
      if (!data) continue;
      const parsed = JSON.parse(data) as { at?: string };
      if (parsed.at) delays.push(Date.now() - Date.parse(parsed.at));
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
  const sorted = [...delays].sort((a, b) => a - b);
  const pct = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
  console.log(
    `SSE delivery delay over ${delays.length} events (poll every 500 ms): p50 ${pct(50)} ms, p95 ${pct(95)} ms, max ${sorted[sorted.length - 1]} ms (target p95 < 1000 ms)`,
  );

  api.server.closeAllConnections();
  api.server.close();
  bareApi.server.close();
  loadApi.server.closeAllConnections();
  loadApi.server.close();
  await bed.destroy();
  await sw.stop();
  await db.destroy();
} finally {
  await stop();
}
