// `npm run bench`: every benchmark, one after the other, each in a process of its own (their
// figures do not share a heap or an event loop), their output shown as it comes; then one table
// and one line `BENCH {json}` merging the `BENCH_<NAME> {json}` line each benchmark printed in
// this run. Nothing is copied from an earlier run: a benchmark that fails leaves its figures out,
// and the run exits non-zero.
import { spawn } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { projectRoot } from '../shared/infra/config';

const BENCHES = [
  'drift-pipeline', // (a) derivation vs jq
  'orchestration-overhead', // (b) a round over its engine and model calls
  'workflow-start', // a workflow's module evaluation, against its imports with the API's contracts
  'engine-sandbox', // what bubblewrap adds to an engine call
  'api', // (c) routes vs their floors, SSE delay
  'sse-fanout', // 1,000 streams on one API process
  'runner-detect', // (d) the runner DAG, one by one and together
  'real-root', // (e) a 1,000-resource root
  'web', // (f) the web application
  'load-sessions', // 50 sessions at once
  'kill-resume', // a worker SIGKILLed mid-round under npm start
  'stacks-scale', // 400 stacks: cold first runs, then 1-minute intervals warm, then two workers (≈ 12 min)
  'events', // audit events against the schedule on 20 stacks, and a burst of 1,000 (≈ 8 min)
  'first-start', // npm start on a fresh clone with empty caches, then again (≈ 12 min, ~15 GB of disk)
];

/** The figures the summary line must hold (issue 13). */
const REQUIRED = [
  'round_overhead_ratio',
  'sse_delay_p95_ms',
  'sse_1000_p95_ms',
  'detail_rps',
  'detail_p99_ms',
  'start_p99_ratio',
  'derive_50k_vs_jq',
];

function run(name: string): Promise<{ code: number; figures: Record<string, unknown> }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', `bench/${name}.ts`], {
      cwd: projectRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const figures: Record<string, unknown> = {};
    let buffer = '';
    child.stdout.on('data', (d: Buffer) => {
      process.stdout.write(d);
      buffer += d.toString('utf8');
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        const m = /^BENCH_[A-Z_]+ (\{.*\})\s*$/.exec(line);
        if (m) Object.assign(figures, JSON.parse(m[1] as string) as Record<string, unknown>);
      }
    });
    child.once('exit', (code) => resolve({ code: code ?? 1, figures }));
  });
}

const only = process.env.BENCH_ONLY?.split(',').filter(Boolean);
const started = new Date();
const all: Record<string, unknown> = {};
const failed: string[] = [];
for (const name of BENCHES) {
  if (only && !only.includes(name)) continue;
  console.log(`\n=== bench/${name}.ts ===`);
  const t0 = performance.now();
  const { code, figures } = await run(name);
  console.log(
    `=== bench/${name}.ts: ${code === 0 ? 'done' : `FAILED (exit ${code})`} in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );
  if (code !== 0) failed.push(name);
  else Object.assign(all, figures);
}
const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
console.log(`\nbenchmarks of ${started.toISOString().slice(0, 10)} on ${machine}`);
const width = Math.max(...Object.keys(all).map((k) => k.length));
for (const [k, v] of Object.entries(all)) console.log(`  ${k.padEnd(width)}  ${String(v)}`);
const missing = only ? [] : REQUIRED.filter((k) => !(k in all));
if (missing.length) console.log(`missing from this run: ${missing.join(', ')}`);
if (failed.length) console.log(`failed: ${failed.join(', ')}`);
console.log(`BENCH ${JSON.stringify({ date: started.toISOString(), machine, ...all })}`);
process.exit(failed.length || missing.length ? 1 : 0);
