// Load: 50 sessions started at once, each running a full drift round on its own branch of one
// drifted root — on one worker process, then on three (BENCH_WORKERS=1,3; the same stack, a fresh
// task queue each). Prints wall time, the workers' peak memory, Temporal task latency
// (schedule-to-start of workflow and activity tasks, from the histories) and checks every report.
// A benchmark, not a test.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { projectRoot } from '../shared/infra/config';
import { driftReportSchema } from '../shared/drift-report';
import { sessionBranch, sessionWorkflowId } from '../shared/ids';
import { quietKnownWarnings } from '../shared/infra/logger';
import { sessionQuery } from '../shared/messages';
import { createDb, migrate } from '../shared/infra/db';
import { sessionRounds } from '../shared/infra/db/sessions';
import { session } from '../workflows/session';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startTestStack } from '../test/support/test-stack';
import { GitClient } from '../activities/git';
import { ArtifactStore, createS3Client } from '../shared/infra/object-store';
import { cliConfigPath, toolPath } from '../shared/infra/tools.mjs';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 50);
const WORKERS = (process.env.BENCH_WORKERS ?? '1,3').split(',').map(Number);

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
};

const { stack, stop } = await startTestStack();
stopOnSignal(stop);
const connection = await Connection.connect({ address: stack.temporalAddress });
const db = createDb(stack.databaseUrl);
await migrate(db);
const client = new Client({ connection });
const git = new GitClient({ caFile: stack.gitCaFile });
const artifacts = new ArtifactStore(
  createS3Client({ endpoint: stack.s3Endpoint, bucket: stack.bucket, region: 'us-east-1' }),
  stack.bucket,
);
const bed = await createDriftTestBed({
  gitHostUrl: stack.gitHostUrl,
  git,
  engine: { kind: 'terraform', binary: toolPath('terraform'), cliConfigFile: cliConfigPath() },
});

function startWorker(queue: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(projectRoot, 'test/support/worker-process.ts')],
    {
      cwd: projectRoot,
      env: { ...process.env, KUMOSS_TEST_STACK: JSON.stringify(stack), KUMOSS_TEST_QUEUE: queue },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve) =>
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('worker ready')) resolve(child);
    }),
  );
}

const rssOf = (pid: number | undefined) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
};

async function load(workerCount: number) {
  const queue = `bench-load-${workerCount}-${randomUUID().slice(0, 6)}`;
  const workers = await Promise.all(Array.from({ length: workerCount }, () => startWorker(queue)));
  const rss = () => workers.reduce((sum, w) => sum + rssOf(w.pid), 0);
  const idleRss = rss();
  let peak = idleRss;
  const sampler = setInterval(() => (peak = Math.max(peak, rss())), 250);
  try {
    const ids = Array.from({ length: SESSIONS }, () => `load-${randomUUID().slice(0, 8)}`);
    const t0 = performance.now();
    await Promise.all(
      ids.map((sid) =>
        client.workflow.start(session, {
          workflowId: sessionWorkflowId(sid),
          taskQueue: queue,
          args: [
            {
              settings: {
                session_id: sid,
                organization_uuid: '00000000-0000-0000-0000-000000000000',
                repository_url: bed.repoUrl,
                cloud: 'aws',
                scope_id: 'load',
                iac_path: '',
                state_project_id: 'load',
                branch: sessionBranch(sid),
                max_drift_reports: 3,
                drift_group_operations: 8,
              },
              first: { round_id: 'r1', kind: 'full', text: 'Reconcile everything.' },
            },
          ],
        }),
      ),
    );
    const done = new Map<string, number>();
    while (done.size < ids.length) {
      await Promise.all(
        ids
          .filter((sid) => !done.has(sid))
          .map(async (sid) => {
            const s = await client.workflow.getHandle(sessionWorkflowId(sid)).query(sessionQuery);
            if (s.round_count >= 1 && !s.in_flight) done.set(sid, performance.now() - t0);
          }),
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    const wall = performance.now() - t0;
    clearInterval(sampler);

    const outcomes = new Map<string, number>();
    const wfTask: number[] = [];
    const actTask: number[] = [];
    /** The activity task that waited longest to start: its type and attempt (a retry's wait includes the attempts before it). */
    let slowest = { ms: -1, what: '' };
    for (const sid of ids) {
      const round = (await sessionRounds(db, sid))[0];
      const report = round?.report_key
        ? driftReportSchema.parse(JSON.parse(await artifacts.getText(round.report_key)))
        : undefined;
      const key = `${round?.status ?? 'none'}/${report?.outcome ?? 'no report'}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      for (const wid of [sessionWorkflowId(sid), round?.workflow_id ?? '']) {
        if (!wid) continue;
        const events = (await client.workflow.getHandle(wid).fetchHistory()).events ?? [];
        const at = new Map(events.map((e) => [String(e.eventId), ms(e.eventTime)]));
        for (const e of events) {
          const w = e.workflowTaskStartedEventAttributes;
          if (w) wfTask.push(ms(e.eventTime) - (at.get(String(w.scheduledEventId)) ?? ms(e.eventTime)));
          const a = e.activityTaskStartedEventAttributes;
          if (a) {
            const wait = ms(e.eventTime) - (at.get(String(a.scheduledEventId)) ?? ms(e.eventTime));
            actTask.push(wait);
            if (wait > slowest.ms) {
              const type = events.find((x) => String(x.eventId) === String(a.scheduledEventId))
                ?.activityTaskScheduledEventAttributes?.activityType?.name;
              slowest = {
                ms: wait,
                what: `${type ?? '?'} attempt ${a.attempt ?? 1}${a.lastFailure?.message ? ` after "${a.lastFailure.message}"` : ''}`,
              };
            }
          }
        }
      }
    }
    const each = [...done.values()];
    console.log(
      `${SESSIONS} sessions started at once, ${workerCount} worker process(es), full round each (2 drifted resources)`,
    );
    console.log(
      `  wall time to the last report: ${(wall / 1000).toFixed(1)} s (first ${(Math.min(...each) / 1000).toFixed(1)} s, median ${(pct(each, 0.5) / 1000).toFixed(1)} s)`,
    );
    console.log(`  rounds: ${[...outcomes].map(([k, n]) => `${n} × ${k}`).join(', ')}`);
    console.log(`  workers' RSS together: idle ${idleRss.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB`);
    console.log(
      `  workflow task schedule-to-start: p50 ${pct(wfTask, 0.5).toFixed(0)} ms, p95 ${pct(wfTask, 0.95).toFixed(0)} ms, max ${pct(wfTask, 1).toFixed(0)} ms (${wfTask.length} tasks)`,
    );
    console.log(
      `  activity task schedule-to-start: p50 ${pct(actTask, 0.5).toFixed(0)} ms, p95 ${pct(actTask, 0.95).toFixed(0)} ms, max ${pct(actTask, 1).toFixed(0)} ms (${actTask.length} tasks; the slowest ${slowest.what})`,
    );
    return {
      wall_s: Number((wall / 1000).toFixed(1)),
      succeeded: outcomes.get('completed/Succeeded') ?? 0,
      peak_rss_mib: Math.round(peak),
      workflow_task_p95_ms: Math.round(pct(wfTask, 0.95)),
    };
  } finally {
    clearInterval(sampler);
    for (const w of workers) w.kill('SIGTERM');
  }
}

try {
  await bed.inject('ingress');
  await bed.inject('attribute');
  const figures: Record<string, number> = { load_sessions: SESSIONS };
  for (const n of WORKERS) {
    const r = await load(n);
    // The first count's figures under the historical names; each count's under its own.
    if (n === WORKERS[0]) {
      figures.load_wall_s = r.wall_s;
      figures.load_succeeded = r.succeeded;
      figures.load_worker_peak_rss_mib = r.peak_rss_mib;
      figures.load_workflow_task_p95_ms = r.workflow_task_p95_ms;
    }
    figures[`load_wall_s_${n}_workers`] = r.wall_s;
    figures[`load_succeeded_${n}_workers`] = r.succeeded;
  }
  console.log(`BENCH_LOAD ${JSON.stringify(figures)}`);
} finally {
  await bed.destroy();
  await connection.close();
  await stop();
}
