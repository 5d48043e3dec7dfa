// Benchmark: 1,000 server-sent event streams on one API process. The API is the real API process
// (api/main.ts) in a process of its own, configured by environment variables to the test stack;
// this process holds the worker that runs the rounds and the 1,000 subscribers, each an HTTP
// connection of its own. Four sessions, 250 streams each: every stream connects after its
// session's first round, then the sessions run a second round one after the other, and each
// stream's delay is measured for every event of its session's second round — from the event's own timestamp (the workflow's clock)
// to the moment the stream read it. Prints the delivery percentiles, the API process's memory
// (resident: before the streams, with them open, at its peak during the rounds).
import { spawn } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { projectRoot } from '../shared/infra/config';
import { createDb } from '../shared/infra/db';
import { createUser } from '../shared/infra/db/users';
import { ensureGitConnection } from '../shared/infra/db/git-connections';
import { quietKnownWarnings } from '../shared/infra/logger';
import { freePort } from '../scripts/embedded/ports';
import { APP_CONFIG, createDriftTestBed, type DriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStackProcess } from '../test/support/test-stack';
import { takeSseEvents } from './sse';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const SESSIONS = Number(process.env.BENCH_SSE_SESSIONS ?? 4);
const STREAMS = Number(process.env.BENCH_SSE_STREAMS ?? 1000);
const QUEUE = 'bench-sse';

/** Resident memory of a process, MiB, from /proc. */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, { encoding: 'utf8', flag: 'r' }));
  return m ? Number(m[1]) / 1024 : NaN;
}

interface Stream {
  /** Delays of the events of the measured round, ms. */
  delays: number[];
  ended: Promise<void>;
  close(): void;
}

/** One SSE subscription on a connection of its own; resolves once the response has started. */
function subscribe(
  base: string,
  token: string,
  sessionId: string,
  since: number,
  earlier: Set<string>,
): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const delays: number[] = [];
    let endRound: () => void = () => undefined;
    const ended = new Promise<void>((r) => (endRound = r));
    const req = http.get(
      `${base}/api/v1/events/subscribe/${sessionId}`,
      { agent: false, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`subscribe answered ${res.statusCode}`));
          res.resume();
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          const taken = takeSseEvents(buffer + chunk);
          buffer = taken.rest;
          for (const { event, data } of taken.events) {
            const parsed = JSON.parse(data) as { at?: string; round_id?: string };
            // The round that ends the stream's watch: the one started after every stream was open.
            if (event === 'round_end' && parsed.round_id && !earlier.has(parsed.round_id)) endRound();
            // Measured: that round's events that carry their time (not the backlog).
            const at = Date.parse(parsed.at ?? '');
            if (at > since) delays.push(Date.now() - at);
          }
        });
        resolve({ delays, ended, close: () => req.destroy() });
      },
    );
    req.on('error', (err) => reject(err));
  });
}

const { stack, stop } = await startTestStackProcess();
stopOnSignal(stop);
const dataDir = mkdtempSync(join(tmpdir(), 'kumoss-bench-sse-'));
let api: ReturnType<typeof spawn> | undefined;
let sampler: NodeJS.Timeout | undefined;
const beds: DriftTestBed[] = [];
try {
  const db = createDb(stack.databaseUrl, { max: 4 });
  const { token, user } = await createUser(db, {
    name: `bench-${Date.now()}`,
    role: 'devops',
    organization: 'bench',
  });
  // The organization may name repositories on the run's git host (a git connection).
  await ensureGitConnection(db, user.organization_uuid, stack.gitHostUrl, 'git');
  const worker = await startStackWorker(stack, QUEUE);
  const port = await freePort();
  api = spawn(process.execPath, ['--import', 'tsx', join(projectRoot, 'api/main.ts')], {
    cwd: projectRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      KUMOSS_DATA_DIR: dataDir,
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_NAMESPACE: stack.namespace,
      KUMOSS_TASK_QUEUE: QUEUE,
      S3_ENDPOINT: stack.s3Endpoint,
      S3_BUCKET: stack.bucket,
      KUMOSS_API_HOST: '127.0.0.1',
      KUMOSS_API_PORT: String(port),
      KUMOSS_LOG_LEVEL: 'warn',
      // The run's git host is on loopback: a private target the API refuses unless named.
      KUMOSS_PRIVATE_TARGETS_ALLOWED: new URL(stack.gitHostUrl).origin,
    },
  });
  api.on('exit', (code, signal) => console.error(`API process exited: ${code ?? signal}`));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/health`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (i > 600) throw new Error('the API process did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  const apiPid = api.pid as number;
  const idle = rssMiB(apiPid);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const post = async (body: Record<string, unknown>) => {
    const r = await fetch(`${base}/api/v1/drift/full`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
    });
    if (r.status !== 202) throw new Error(`drift/full answered ${r.status}: ${await r.text()}`);
    return (await r.json()) as { session_id: string; round_id: string };
  };
  const roundEnded = async (sessionId: string, rounds: number) => {
    for (;;) {
      const d = (await (await fetch(`${base}/api/v1/sessions/${sessionId}`, { headers })).json()) as {
        rounds: unknown[];
        in_flight: unknown;
      };
      if (d.rounds.length >= rounds && d.in_flight === null) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  // Each session's first round (on a root in sync: quick), then its streams.
  const sessions: string[] = [];
  const earlier = new Set<string>();
  for (let s = 0; s < SESSIONS; s++) {
    const bed = await createDriftTestBed({
      gitHostUrl: stack.gitHostUrl,
      git: worker.git,
      engine: worker.engine,
    });
    beds.push(bed);
    const accepted = await post({
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'bench',
      text: 'Reconcile everything.',
    });
    sessions.push(accepted.session_id);
    earlier.add(accepted.round_id);
  }
  await Promise.all(sessions.map((id) => roundEnded(id, 1)));
  const since = Date.now();
  const t0 = performance.now();
  const streams: Stream[] = [];
  for (let i = 0; i < STREAMS; i += 50) {
    const batch = Array.from({ length: Math.min(50, STREAMS - i) }, (_, j) =>
      subscribe(base, token, sessions[(i + j) % SESSIONS] as string, since, earlier),
    );
    streams.push(...(await Promise.all(batch)));
  }
  const connectS = (performance.now() - t0) / 1000;
  const open = rssMiB(apiPid);
  let peak = open;
  sampler = setInterval(() => (peak = Math.max(peak, rssMiB(apiPid))), 100);
  // The measured rounds: new drift on each bed, a follow-up round in its session, one session
  // after the other — the rounds make the changes; they are not the load (four at once would
  // saturate the two cores with terraform and measure that) — while all 1,000 streams stay open.
  const t1 = performance.now();
  for (const [s, bed] of beds.entries()) {
    await bed.api.put(APP_CONFIG.id, { ...APP_CONFIG, replicas: 5 });
    await post({ session_id: sessions[s], text: 'Reconcile everything.' });
    await Promise.all(streams.filter((_, i) => i % SESSIONS === s).map((st) => st.ended));
  }
  const roundsS = (performance.now() - t1) / 1000;
  clearInterval(sampler);
  const delays = streams.flatMap((st) => st.delays).sort((a, b) => a - b);
  const pct = (p: number) =>
    delays[Math.min(delays.length - 1, Math.floor((p / 100) * delays.length))] ?? NaN;
  const perStream = delays.length / streams.length;
  console.log(
    `${STREAMS} SSE streams on one API process (${SESSIONS} sessions × ${STREAMS / SESSIONS}), connected in ${connectS.toFixed(1)} s`,
  );
  console.log(
    `a round in each session, one after the other (${roundsS.toFixed(1)} s): ${delays.length} deliveries (${perStream.toFixed(1)} events per stream); ` +
      `delay p50 ${pct(50)} ms, p95 ${pct(95)} ms, p99 ${pct(99)} ms, max ${delays[delays.length - 1]} ms (target p95 <= 1000 ms)`,
  );
  console.log(
    `API process resident memory: ${idle.toFixed(0)} MiB before the streams, ${open.toFixed(0)} MiB with ${STREAMS} open ` +
      `(${(((open - idle) * 1024) / STREAMS).toFixed(0)} KiB per stream), peak ${peak.toFixed(0)} MiB during the rounds`,
  );
  for (const st of streams) st.close();
  console.log(
    `BENCH_SSE ${JSON.stringify({
      sse_1000_p50_ms: pct(50),
      sse_1000_p95_ms: pct(95),
      sse_1000_streams: STREAMS,
      api_rss_idle_mib: Math.round(idle),
      api_rss_1000_mib: Math.round(open),
      api_rss_peak_mib: Math.round(peak),
    })}`,
  );
  await worker.stop();
  await db.destroy();
} finally {
  clearInterval(sampler);
  api?.kill('SIGTERM');
  if (api && api.exitCode === null) await new Promise((r) => api?.once('exit', r));
  for (const bed of beds) await bed.destroy();
  rmSync(dataDir, { recursive: true, force: true });
  await stop();
}
