// Scale of scheduled detection on one machine, as a ceiling: 400 stacks of the drift test bed's
// root on one worker (a process of its own, engine slots = cores) — one repository and one state
// for all (a detection reads the state without its lock). First every stack's first run,
// all offered at once (each workspace cold: clone and init); then a 1-minute interval with jitter
// (400 detections a minute offered, more than this machine takes) with the workspaces warm (fetch,
// plan without init) — both of the root without drift, whose plans change nothing (no show -json);
// then, after a minute in which a second worker joins and takes the backlog
// with the first, an interval with both and drift injected. Prints the runs finished within each
// interval (whenever they started), CPU-seconds a detection by process, schedule-to-start lag, run
// time, machine CPU, each worker's peak memory and the most engine processes seen at once, and
// the CPU of each program a warm detection runs, alone; then checks the two-worker interval: every
// run recorded once, every stack whose run began after the drift holding exactly one open item for
// it. A benchmark, not a test.
//
// `npm run bench:stacks`; BENCH_STACKS (400), BENCH_STACKS_INTERVAL_S (60), BENCH_STACKS_SLOTS
// (engine processes per worker, 0 = cores), BENCH_STACKS_PROFILE_DIR (each worker's CPU profile).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { Client, Connection, type WorkflowExecutionInfo } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { GitClient } from '../activities/git';
import { StackSchedules } from '../api/schedules';
import { DEFAULT_GO_MEMORY_LIMIT_MIB, projectRoot } from '../shared/infra/config';
import { createDb, migrate } from '../shared/infra/db';
import { createStack } from '../shared/infra/db/stacks';
import { createUser } from '../shared/infra/db/users';
import { quietKnownWarnings } from '../shared/infra/logger';
import { stackScheduleId } from '../shared/stack-contracts';
import { cliConfigPath, toolPath } from '../shared/infra/tools.mjs';
import { createDriftTestBed, DRIFT_ADDRESSES } from '../test/support/drift-test-bed';
import { startTestStack } from '../test/support/test-stack';
import { cpuByLabel, snapshot, stackLabeller } from './proc-cpu';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const STACKS = Number(process.env.BENCH_STACKS ?? 400);
const INTERVAL_S = Number(process.env.BENCH_STACKS_INTERVAL_S ?? 60);
const SLOTS = process.env.BENCH_STACKS_SLOTS ?? '0';
/** Where each worker writes its V8 CPU profile when it stops (`.cpuprofile`); none when unset. */
const PROFILE_DIR = process.env.BENCH_STACKS_PROFILE_DIR;
const queue = 'bench-stacks';

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
};
const sleepUntil = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

const { stack, stop } = await startTestStack();
const workers: ChildProcess[] = [];
stopOnSignal(stop, () => workers);
async function startWorker(): Promise<ChildProcess> {
  const w = spawn(
    process.execPath,
    [
      ...(PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
      '--import',
      'tsx',
      join(projectRoot, 'test/support/worker-process.ts'),
    ],
    {
      cwd: projectRoot,
      env: {
        ...process.env,
        KUMOSS_TEST_STACK: JSON.stringify(stack),
        KUMOSS_TEST_QUEUE: queue,
        KUMOSS_TEST_ENGINE_SLOTS: SLOTS,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve) =>
    w.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('worker ready')) resolve();
    }),
  );
  workers.push(w);
  return w;
}
const rss = (pid: number) => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
};
/** Engine processes running now, machine-wide. */
const engineProcesses = () => {
  let n = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'terraform') n += 1;
    } catch {
      // gone
    }
  }
  return n;
};
const cpuTimes = () =>
  cpus().reduce(
    (acc, c) => {
      const t = c.times;
      acc.busy += t.user + t.nice + t.sys + t.irq;
      acc.all += t.user + t.nice + t.sys + t.irq + t.idle;
      return acc;
    },
    { busy: 0, all: 0 },
  );

const labeller = () => stackLabeller({ benchPid: process.pid, workerPids: workers.map((w) => w.pid!) });
/** CPU-seconds a detection by process, over a stretch in which `runs` detections finished. */
const cpuLine = (before: ReturnType<typeof snapshot>, after: ReturnType<typeof snapshot>, runs: number) =>
  cpuByLabel(before, after)
    .map(([label, s]) => `${label} ${(s / Math.max(1, runs)).toFixed(3)}`)
    .join(', ');

/** Reaped children's CPU of this process, in seconds (/proc/self/stat cutime + cstime). */
const childrenCpuS = () => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  return ((f[13] ?? 0) + (f[14] ?? 0)) / 100;
};

/**
 * The programs one warm detection runs, each timed alone on a warm checkout of the bed: the CPU of
 * the program and its children (terraform's providers), and this process's own while it serves
 * them (the git host, the REST cloud). Asynchronous: the git host answers from this very process.
 */
async function detectionSteps(): Promise<string> {
  const run = promisify(execFile);
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-steps-'));
  const env = {
    ...process.env,
    GIT_SSL_CAINFO: stack.gitCaFile,
    TF_CLI_CONFIG_FILE: cliConfigPath(),
    TF_IN_AUTOMATION: '1',
  };
  const checkout = join(dir, 'c');
  await run('git', ['clone', '--quiet', bed.repoUrl, checkout], { env });
  // The engine's variables as the worker sets them under its sandbox: the Go runtime
  // (engine.go_memory_limit_mib's default) and the providers spoken to without TLS.
  const goRuntime = { GOGC: 'off', GOMEMLIMIT: `${DEFAULT_GO_MEMORY_LIMIT_MIB}MiB` };
  const noPluginTls = { TF_DISABLE_PLUGIN_TLS: '1' };
  const tfWith =
    (extra: Record<string, string>) =>
    (...args: string[]) =>
      run(toolPath('terraform'), args, { env: { ...env, ...extra }, cwd: checkout, maxBuffer: 1 << 26 });
  const tf = tfWith({ ...goRuntime, ...noPluginTls });
  const plan = (engine: typeof tf) => () =>
    engine('plan', '-input=false', '-no-color', '-detailed-exitcode', '-out=plan.tfplan').catch(
      (err: { code?: number }) => {
        if (err.code !== 2) throw err;
      },
    );
  await tf('init', '-input=false', '-no-color');
  const steps: [string, () => Promise<unknown>][] = [
    [
      'git fetch',
      // With the environment the worker's git client gives git (its trust bundle and CA path).
      () =>
        run('git', ['fetch', '--quiet', '--no-tags', '--prune', 'origin'], { env: git.env(), cwd: checkout }),
    ],
    [
      // Side by side: git's default, which also reads every file of the system's certificate
      // directory on each call (what the client's empty CA path saves).
      'git fetch reading the system certificate directory too',
      () => {
        const { GIT_SSL_CAPATH: _, ...env } = git.env();
        return run('git', ['fetch', '--quiet', '--no-tags', '--prune', 'origin'], { env, cwd: checkout });
      },
    ],
    ['terraform plan', plan(tf)],
    // Side by side: the engine and its providers with Go's default garbage collector.
    ["terraform plan with Go's default collector", plan(tfWith(noPluginTls))],
    // Side by side: mutual TLS on every provider start (the engine's default, kept unsandboxed).
    ['terraform plan with TLS to its providers', plan(tfWith(goRuntime))],
    ['terraform show -json', () => tf('show', '-json', '-no-color', 'plan.tfplan')],
  ];
  const out: string[] = [];
  try {
    for (const [name, step] of steps) {
      const rows: { wall: number; cpu: number; self: number }[] = [];
      for (let r = 0; r < 5; r++) {
        const c0 = childrenCpuS();
        const s0 = process.cpuUsage();
        const t0 = performance.now();
        await step();
        const self = process.cpuUsage(s0);
        rows.push({
          wall: (performance.now() - t0) / 1000,
          cpu: childrenCpuS() - c0,
          self: (self.user + self.system) / 1e6,
        });
      }
      const med = (k: 'wall' | 'cpu' | 'self') =>
        pct(
          rows.map((x) => x[k]),
          0.5,
        ).toFixed(3);
      out.push(`${name} ${med('wall')} s wall, ${med('cpu')} CPU-s (+${med('self')} serving)`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return out.join('; ');
}

const connection = await Connection.connect({ address: stack.temporalAddress });
const client = new Client({ connection });
const db = createDb(stack.databaseUrl, { max: 8 });
await migrate(db);
const git = new GitClient({ caFile: stack.gitCaFile });
const bed = await createDriftTestBed({
  gitHostUrl: stack.gitHostUrl,
  git,
  engine: { kind: 'terraform', binary: toolPath('terraform'), cliConfigFile: cliConfigPath() },
});
const schedules = new StackSchedules(client, queue);
const stackIds: string[] = [];
try {
  await startWorker();
  const org = `bench-stacks-${Date.now()}`;
  const { user } = await createUser(db, { name: `devops-${org}`, role: 'devops', organization: org });
  // The cycle starts 20 s after the last schedule exists; jitter spreads each interval's runs.
  const created = performance.now();
  for (let i = 0; i < STACKS; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, STACKS - i) }, async (_, k) => {
        const s = await createStack(
          db,
          user.organization_uuid,
          {
            name: `stack-${i + k}`,
            repository_url: bed.repoUrl,
            cloud: 'aws',
            scope_id: 'bench',
            // Nothing fires on its own before the measured intervals (the prime triggers each).
            schedule: { interval_minutes: 24 * 60 },
          },
          user.user_uuid,
        );
        await schedules.create(s);
        stackIds.push(s.stack_uuid);
      }),
    );
  }
  console.log(
    `${STACKS} stacks and schedules created in ${((performance.now() - created) / 1000).toFixed(1)} s`,
  );

  // The prime: every stack's first run on this worker, all at once (each workspace cold: a clone
  // and init); the figure is the cold ceiling, since all are offered together.
  const primeState = async () => {
    const rows = await db
      .selectFrom('detection_runs')
      .select(['stack_uuid', 'status', 'error'])
      .where('stack_uuid', 'in', stackIds)
      .execute();
    return {
      finished: new Set(rows.filter((r) => r.status !== 'running').map((r) => r.stack_uuid)).size,
      failed: rows.filter((r) => r.status === 'failed'),
    };
  };
  const primeCpu0 = cpuTimes();
  const primeProcs0 = snapshot(labeller());
  const primeStart = Date.now();
  await Promise.all(stackIds.map((id) => client.schedule.getHandle(stackScheduleId(id)).trigger()));
  for (let last = Date.now(); ;) {
    const { finished, failed } = await primeState();
    if (finished >= STACKS) {
      for (const f of failed.slice(0, 5)) console.log(`  a first run failed: ${f.error}`);
      console.log(`  ${failed.length} of the first runs failed`);
      break;
    }
    if (Date.now() - last > 30_000) {
      console.log(`  ${finished} of ${STACKS} first runs finished (${failed.length} failed)`);
      last = Date.now();
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
  const primeS = (Date.now() - primeStart) / 1000;
  const primeCpu1 = cpuTimes();
  const primeProcs1 = snapshot(labeller());
  const coldPerMin = (STACKS / primeS) * 60;
  console.log(`  CPU-seconds a detection by process (cold): ${cpuLine(primeProcs0, primeProcs1, STACKS)}`);
  console.log(
    `first runs (cold workspaces, one worker): ${STACKS} in ${primeS.toFixed(1)} s, ${coldPerMin.toFixed(1)} a minute, machine CPU ${((100 * (primeCpu1.busy - primeCpu0.busy)) / (primeCpu1.all - primeCpu0.all)).toFixed(0)}%, ${((primeCpu1.busy - primeCpu0.busy) / 1000 / STACKS).toFixed(2)} CPU-seconds a detection (the whole machine: worker, engines, Temporal, stores, git host)`,
  );

  // The measured intervals start 10 s from now; jitter spreads each interval's runs.
  const t1 = Math.ceil((Date.now() + 10_000) / 1000) * 1000;
  const offset = (t1 / 1000) % INTERVAL_S;
  await Promise.all(
    stackIds.map((id) =>
      client.schedule.getHandle(stackScheduleId(id)).update((prev) => ({
        ...prev,
        spec: {
          intervals: [{ every: `${INTERVAL_S}s`, offset: `${offset}s` }],
          jitter: `${INTERVAL_S - 10}s`,
        },
      })),
    ),
  );
  console.log(`measured intervals start ${new Date(t1).toISOString()}`);

  const runsOf = async (from: number, to: number): Promise<WorkflowExecutionInfo[]> => {
    const out: WorkflowExecutionInfo[] = [];
    for await (const w of client.workflow.list({
      query: `WorkflowType = 'stackDetection' AND KumossOrganization = '${user.organization_uuid}'`,
    }))
      if (w.startTime.getTime() >= from && w.startTime.getTime() < to) out.push(w);
    return out;
  };

  async function interval(label: string, from: number) {
    const to = from + INTERVAL_S * 1000;
    await sleepUntil(from);
    const c0 = cpuTimes();
    const p0 = snapshot(labeller());
    const peaks = new Map<number, number>();
    let engines = 0;
    const sampler = setInterval(() => {
      for (const w of workers) peaks.set(w.pid!, Math.max(peaks.get(w.pid!) ?? 0, rss(w.pid!)));
      engines = Math.max(engines, engineProcesses());
    }, 500);
    await sleepUntil(to);
    clearInterval(sampler);
    const c1 = cpuTimes();
    const p1 = snapshot(labeller());
    const runs = await runsOf(from, to);
    // The ceiling: runs that finished within the window, whenever they started (with more
    // offered than the machine takes, some started in it finish after it).
    let completedInWindow = 0;
    for await (const w of client.workflow.list({
      query: `WorkflowType = 'stackDetection' AND KumossOrganization = '${user.organization_uuid}' AND ExecutionStatus = 'Completed'`,
    }))
      if (w.closeTime && w.closeTime.getTime() >= from && w.closeTime.getTime() < to) completedInWindow += 1;
    console.log(
      `${label}: CPU-seconds a detection by process (${completedInWindow} finished within the interval): ${cpuLine(p0, p1, completedInWindow)}`,
    );
    return {
      label,
      from,
      to,
      runs,
      cpu: (100 * (c1.busy - c0.busy)) / (c1.all - c0.all),
      peaks: [...peaks.values()].map(Math.round),
      engines,
      completedInWindow,
    };
  }

  const one = await interval('one worker, warm workspaces', t1);
  // A second worker beside the first, and drift every stack will see. The interval after next is
  // measured: in the next one the two workers take the backlog the first left (more is offered
  // than one worker takes, and a stack whose run is under way skips its next), so the measured one
  // starts with both workers already under the offered load.
  await startWorker();
  await bed.inject('ingress');
  const injectedAt = Date.now();
  console.log(`two workers from ${new Date(one.to).toISOString()}; the interval after next is measured`);
  const two = await interval('two workers, drift injected', one.to + INTERVAL_S * 1000);
  // Stop the schedules and let the runs under way finish.
  await Promise.all(stackIds.map((id) => client.schedule.getHandle(stackScheduleId(id)).pause('bench over')));
  const drained = async (r: { runs: WorkflowExecutionInfo[]; from: number; to: number }) => {
    for (;;) {
      const now = await runsOf(r.from, r.to);
      if (now.every((w) => w.status.name !== 'RUNNING')) return now;
      await new Promise((res) => setTimeout(res, 2000));
    }
  };
  const report = async (r: Awaited<ReturnType<typeof interval>>) => {
    const runs = await drained(r);
    const rows = await db
      .selectFrom('detection_runs')
      .select(['run_id', 'started_at', 'finished_at', 'status'])
      .where(
        'run_id',
        'in',
        runs.map((w) => w.workflowId),
      )
      .execute();
    const byId = new Map(rows.map((x) => [x.run_id, x]));
    const lag: number[] = [];
    const took: number[] = [];
    for (const w of runs) {
      const row = byId.get(w.workflowId);
      if (row) lag.push(new Date(row.started_at).getTime() - w.startTime.getTime());
      if (w.closeTime) took.push(w.closeTime.getTime() - w.startTime.getTime());
    }
    const ok = runs.filter((w) => w.status.name === 'COMPLETED').length;
    const minutes = INTERVAL_S / 60;
    // The interval's runs, offered within it, drained: how many a minute the machine finished
    // from the interval's start to the last one's end (the ceiling when more were offered).
    const lastClose = Math.max(...runs.map((w) => w.closeTime?.getTime() ?? 0));
    const drainedPerMin = runs.length > 0 ? (ok / (lastClose - r.from)) * 60_000 : 0;
    console.log(`${r.label}: ${runs.length} runs started in the ${minutes}-minute interval`);
    console.log(
      `  completed: ${ok} of them (${runs.length - ok} not), the last ${((lastClose - r.from) / 1000).toFixed(1)} s after the interval began: ${drainedPerMin.toFixed(1)} a minute; ${(r.completedInWindow / minutes).toFixed(1)} runs a minute finished within the interval`,
    );
    console.log(
      `  schedule-to-start lag: p50 ${pct(lag, 0.5).toFixed(0)} ms, p95 ${pct(lag, 0.95).toFixed(0)} ms, max ${pct(lag, 1).toFixed(0)} ms`,
    );
    console.log(
      `  run time: p50 ${(pct(took, 0.5) / 1000).toFixed(1)} s, p95 ${(pct(took, 0.95) / 1000).toFixed(1)} s`,
    );
    console.log(
      `  machine CPU ${r.cpu.toFixed(0)}%, worker peak RSS ${r.peaks.join(' / ')} MiB, most engine processes at once: ${r.engines}`,
    );
    return { runs, rows, ok, lag, took, drainedPerMin };
  };
  const a = await report(one);
  const b = await report(two);

  // Correctness with two workers: each run recorded once and finished; each stack whose run began
  // after the drift was injected holds exactly one open item, for the drifted resource.
  const items = await db
    .selectFrom('drift_items')
    .select(['stack_uuid', 'address', 'state'])
    .where('stack_uuid', 'in', stackIds)
    .where('state', '=', 'open')
    .execute();
  const openBy = new Map<string, string[]>();
  for (const i of items) openBy.set(i.stack_uuid, [...(openBy.get(i.stack_uuid) ?? []), i.address]);
  const sawDrift = new Set(
    b.rows
      .filter((r) => r.status === 'completed' && new Date(r.started_at).getTime() > injectedAt)
      .map((r) => /^drift-detection:([0-9a-f-]{36})-/.exec(r.run_id)?.[1] ?? ''),
  );
  const wrong = [...sawDrift].filter((id) => {
    const open = openBy.get(id) ?? [];
    return open.length !== 1 || open[0] !== DRIFT_ADDRESSES.ingress;
  });
  const recordedOnce = b.rows.length === b.runs.length && b.rows.every((r) => r.status !== 'running');
  console.log(
    `two workers: ${b.rows.length} of ${b.runs.length} runs recorded, each once and finished; ${sawDrift.size - wrong.length} of the ${sawDrift.size} stacks whose run began after the drift hold exactly its one open item`,
  );
  const steps = await detectionSteps();
  console.log(
    `one warm detection's processes, each alone (median of 5; CPU of the process and its children, and of this process serving it — git host, REST cloud): ${steps}`,
  );
  const minutes = INTERVAL_S / 60;
  console.log(
    `BENCH_STACKS ${JSON.stringify({
      stacks: STACKS,
      stacks_interval_s: INTERVAL_S,
      // Issue 29's key: the most this machine finished a minute with more offered than it takes —
      // runs finished within a measured interval, one worker or two.
      stack_detections_per_min: Number(
        (Math.max(one.completedInWindow, two.completedInWindow) / minutes).toFixed(1),
      ),
      stacks_detections_per_min_1w_cold: Number(coldPerMin.toFixed(1)),
      stacks_detections_per_min_1w: Number((one.completedInWindow / minutes).toFixed(1)),
      // The interval's own runs over the time to the last one's end (later intervals' runs compete).
      stacks_drained_per_min_1w: Number(a.drainedPerMin.toFixed(1)),
      stacks_detections_per_min_2w: Number((two.completedInWindow / minutes).toFixed(1)),
      stacks_completed_1w: a.ok,
      stacks_completed_2w: b.ok,
      stacks_lag_p95_ms_1w: Math.round(pct(a.lag, 0.95)),
      stacks_lag_p95_ms_2w: Math.round(pct(b.lag, 0.95)),
      stacks_run_p95_s_1w: Number((pct(a.took, 0.95) / 1000).toFixed(1)),
      stacks_cpu_pct_1w: Math.round(one.cpu),
      stacks_cpu_pct_2w: Math.round(two.cpu),
      stacks_worker_peak_rss_mib: Math.max(...one.peaks, ...two.peaks),
      stacks_engine_processes_max_1w: one.engines,
      stacks_engine_processes_max_2w: two.engines,
      stacks_two_workers_correct: recordedOnce && wrong.length === 0,
    })}`,
  );
  if (!recordedOnce || wrong.length > 0) process.exitCode = 1;
} finally {
  for (const w of workers) w.kill('SIGTERM');
  await Promise.all(
    stackIds.map((id) =>
      client.schedule
        .getHandle(stackScheduleId(id))
        .delete()
        .catch(() => undefined),
    ),
  );
  await bed.destroy();
  await db.destroy();
  await connection.close();
  await stop();
}
