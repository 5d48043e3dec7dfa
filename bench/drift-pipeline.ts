// Benchmark (a): derive + split + exclude + group on synthetic plans of 1k, 10k and 50k resources,
// side by side with jq extracting the changed addresses from the same file.
// Targets: faster than jq; peak memory (above the process baseline) under 2x the file size.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../shared/infra/config';
import { writeSyntheticPlan } from './synthetic-plan';

const sizes = (process.env.BENCH_SIZES ?? '1000,10000,50000').split(',').map(Number);
const runs = Number(process.env.BENCH_RUNS ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'kumoss-bench-'));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

function haveJq(): boolean {
  return spawnSync('jq', ['--version']).status === 0;
}

if (!haveJq()) {
  console.error('jq is needed for the side-by-side figures: apt-get install jq');
  process.exit(1);
}
const jqVersion = execFileSync('jq', ['--version'], { encoding: 'utf8' }).trim();
console.log(
  `drift pipeline vs ${jqVersion}, median of ${runs} runs, on ${process.arch} Node ${process.version}`,
);
console.log(
  'resources  file MiB  drifted  kumoss ms  jq ms  speed-up  kumoss peak MiB  peak/file  jq peak MiB',
);
const figures: Record<string, number> = {};
try {
  for (const n of sizes) {
    const file = join(dir, `plan-${n}.json`);
    const drifted = await writeSyntheticPlan(file, n);
    const bytes = statSync(file).size;
    const ours: { ms: number; peakKiB: number }[] = [];
    const jq: { ms: number; peakKiB: number }[] = [];
    for (let r = 0; r < runs; r++) {
      const child = execFileSync(
        process.execPath,
        ['--import', 'tsx', 'bench/drift-pipeline-child.ts', file],
        {
          cwd: projectRoot,
          encoding: 'utf8',
        },
      );
      ours.push(JSON.parse(child.trim().split('\n').pop() ?? '{}') as { ms: number; peakKiB: number });
      const t0 = performance.now();
      const res = spawnSync(
        '/usr/bin/time',
        [
          '-f',
          '%M',
          'jq',
          '-r',
          '.resource_changes[] | select(.change.actions != ["no-op"]) | .address',
          file,
        ],
        { encoding: 'utf8', maxBuffer: 1 << 28 },
      );
      const ms = performance.now() - t0;
      jq.push({ ms, peakKiB: Number(res.stderr.trim().split('\n').pop()) });
      const jqCount = res.stdout.trim().split('\n').filter(Boolean).length;
      if (jqCount !== drifted) throw new Error(`jq found ${jqCount} changed addresses, expected ${drifted}`);
    }
    const oursMs = median(ours.map((o) => o.ms));
    const jqMs = median(jq.map((o) => o.ms));
    const peak = median(ours.map((o) => o.peakKiB)) / 1024;
    const mib = bytes / 1048576;
    const label = n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n);
    figures[`derive_${label}_vs_jq`] = Number((jqMs / oursMs).toFixed(2));
    figures[`derive_${label}_peak_per_file`] = Number((peak / mib).toFixed(2));
    console.log(
      [
        String(n).padStart(9),
        mib.toFixed(1).padStart(8),
        String(drifted).padStart(8),
        oursMs.toFixed(0).padStart(10),
        jqMs.toFixed(0).padStart(6),
        `${(jqMs / oursMs).toFixed(1)}x`.padStart(9),
        peak.toFixed(1).padStart(16),
        (peak / mib).toFixed(2).padStart(10),
        (median(jq.map((o) => o.peakKiB)) / 1024).toFixed(1).padStart(12),
      ].join('  '),
    );
  }
  // The one-line summary's share (bench/all.ts): jq's time over ours, ours' peak over the file.
  console.log(`BENCH_DERIVE ${JSON.stringify(figures)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
