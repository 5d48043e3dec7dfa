// Benchmark: `npm start` on a fresh clone with every cache empty — the tool cache, Go's module and
// build caches, npm's and pip's (each pointed at an empty directory of this run; the machine's own
// caches are not touched) — until the launcher says the whole system is up with the forge (the
// worker and the API start only once the forge has); then a second start on the same caches and
// data directory, as a user starts the system again.
// Prints both, setup's own timeline of the first, and when the providers and OPA it builds in the
// background once the system is up are ready. Takes about as long as a first start (10–15
// minutes on 2 cores) and ~15 GB of disk while it runs.
//
// `npm run bench:first-start`; BENCH_FIRST_START_KEEP=1 keeps the directory (to look at it).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../shared/infra/config';
import { launcherEnv, launcherPorts } from '../test/support/launcher';
import { backgroundBuildFiles, GO_TOOLS, toolReady } from '../shared/infra/tools.mjs';

const dir = mkdtempSync(join(tmpdir(), 'kumoss-first-start-'));
const clone = join(dir, 'kumoss');
const caches = join(dir, 'caches');
for (const d of ['xdg', 'go', 'npm', 'pip']) mkdirSync(join(caches, d), { recursive: true });
// This process reads the run's tool cache too (which tools are ready).
delete process.env.KUMOSS_CACHE_DIR;
process.env.XDG_CACHE_HOME = join(caches, 'xdg');
// The clone is of the commit checked out here: what CI would start.
execFileSync('git', ['clone', '--quiet', projectRoot, clone]);

/** One `npm start` until it says it is up; then Ctrl-C and its exit. Seconds to up, and its start. */
async function start(label: string): Promise<{ up: number; t0: number }> {
  const ports = await launcherPorts();
  // One data directory: a later start is the same system started again.
  const data = join(dir, 'data');
  // The machine's own settings (HOME's .npmrc, Go's env file, pip's config, the CA bundle) stay;
  // every cache moves to an empty directory of this run.
  const { KUMOSS_CACHE_DIR: _cache, ...inherited } = process.env;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    XDG_CACHE_HOME: join(caches, 'xdg'),
    GOPATH: join(caches, 'go'),
    GOCACHE: join(caches, 'xdg', 'go-build'),
    GOMODCACHE: join(caches, 'go', 'pkg', 'mod'),
    npm_config_cache: join(caches, 'npm'),
    PIP_CACHE_DIR: join(caches, 'pip'),
    ...launcherEnv(data, ports, ports.forge),
  };
  const t0 = performance.now();
  const child = spawn('npm', ['start'], {
    cwd: clone,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  const up = await new Promise<boolean>((resolve) => {
    const onData = (d: Buffer) => {
      const text = d.toString();
      out += text;
      for (const line of text.split('\n'))
        if (/^\[setup\]|^\[kumoss\] (?! {2})/.test(line))
          console.log(`  ${label}: ${((performance.now() - t0) / 1000).toFixed(0)} s ${line}`);
      if (/press Ctrl-C to stop/.test(out)) resolve(true);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', () => resolve(false));
  });
  const s = (performance.now() - t0) / 1000;
  if (!up) throw new Error(`npm start (${label}) exited before it was up:\n${out.slice(-4000)}`);
  if (!/forge \(Gitea/.test(out))
    throw new Error(`npm start (${label}) came up without the forge:\n${out.slice(-4000)}`);
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(-child.pid!, 'SIGINT');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
  if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  return { up: s, t0 };
}

try {
  const { up: first, t0 } = await start('first start');
  console.log(`first npm start, empty caches, to up with the forge: ${first.toFixed(0)} s (target ≤ 600 s)`);
  // The providers and OPA build in the background once the system is up (a run that needs one
  // waits for it): when each is ready.
  const providers = GO_TOOLS.filter((t) => t.provider && !t.background).map((t) => t.name);
  const readyAt = new Map<string, number>();
  for (const names = [...providers, 'opa']; readyAt.size < names.length;) {
    for (const n of names.filter((n) => !readyAt.has(n))) {
      if (toolReady(n)) readyAt.set(n, (performance.now() - t0) / 1000);
      else if (existsSync(backgroundBuildFiles(n).failed))
        throw new Error(`the background build of ${n} failed: ${backgroundBuildFiles(n).log}`);
    }
    if (readyAt.size < names.length) await new Promise((r) => setTimeout(r, 1000));
  }
  const providersAt = Math.max(...providers.map((n) => readyAt.get(n) ?? 0));
  const opaAt = readyAt.get('opa') ?? 0;
  console.log(`  first start: ${providersAt.toFixed(0)} s ${providers.join(', ')} in the provider mirror`);
  console.log(`  first start: ${opaAt.toFixed(0)} s OPA built`);
  const { up: later } = await start('later start');
  console.log(`a later npm start: ${later.toFixed(1)} s (target ≤ 20 s)`);
  console.log(
    `BENCH_FIRST_START ${JSON.stringify({ first_start_with_forge_s: Math.round(first), first_start_providers_s: Math.round(providersAt), first_start_opa_s: Math.round(opaAt), later_start_s: Number(later.toFixed(1)) })}`,
  );
} finally {
  if (!process.env.BENCH_FIRST_START_KEEP) {
    // Go's module cache is read-only on disk.
    execFileSync('chmod', ['-R', 'u+w', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
}
