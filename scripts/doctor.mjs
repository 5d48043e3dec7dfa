#!/usr/bin/env node
// `npm run doctor`: every component Kumoss needs, with version, path and readiness. Exits
// non-zero when a required one is missing. Also says which services of `npm start` are running.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import {
  GO_TOOLS,
  npmDependenciesMatch,
  PY_TOOLS,
  pyToolPath,
  PROVIDER_HOSTS,
  cliConfigPath,
  probeTool,
  projectRoot,
  providerMirrorBinary,
  toolPath,
  toolsDir,
} from '../shared/infra/tools.mjs';

/** @type {{ name: string, version: string, path: string, ready: boolean, required: boolean }[]} */
const rows = [];

/** @param {string} cmd @param {string[]} args */
function versionOf(cmd, args) {
  try {
    const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const path = execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim();
    return { ok: true, version: out.trim().split('\n')[0] ?? '', path };
  } catch {
    return { ok: false, version: 'missing', path: '-' };
  }
}

for (const [name, cmd, args] of /** @type {[string, string, string[]][]} */ ([
  ['node', 'node', ['--version']],
  ['go', 'go', ['version']],
  ['git', 'git', ['--version']],
  ['openssl', 'openssl', ['version']],
])) {
  const v = versionOf(cmd, args);
  rows.push({ name, version: v.version, path: v.path, ready: v.ok, required: true });
}

// The embedded metadata store's server (scripts/embedded/postgres.ts finds it the same way).
const pgBin = process.env.KUMOSS_POSTGRES_BIN_DIR
  ? join(process.env.KUMOSS_POSTGRES_BIN_DIR, 'postgres')
  : (['17', '16', '15', '14']
      .map((v) => `/usr/lib/postgresql/${v}/bin/postgres`)
      .find((p) => existsSync(p)) ?? '/usr/lib/postgresql/<n>/bin/postgres');
const pgVersion = existsSync(pgBin) ? versionOf(pgBin, ['--version']) : { ok: false, version: 'missing' };
rows.push({
  name: 'PostgreSQL server',
  version: pgVersion.version,
  path: pgBin,
  ready: pgVersion.ok,
  required: true,
});

const depsReady = npmDependenciesMatch();
rows.push({
  name: 'npm dependencies',
  version: depsReady ? 'match package-lock.json' : 'missing or outdated',
  path: join(projectRoot, 'node_modules'),
  ready: depsReady,
  required: true,
});

for (const tool of GO_TOOLS) {
  const required = true;
  const path = toolPath(tool.name);
  const probe = probeTool(tool, path);
  rows.push({
    name: tool.name,
    version: probe.ok ? `${tool.version} (${probe.detail.slice(0, 60)})` : `${tool.version}: ${probe.detail}`,
    path,
    ready: probe.ok,
    required,
  });
  if (tool.provider) {
    const mirrored = PROVIDER_HOSTS.every((h) => existsSync(providerMirrorBinary(tool, h)));
    rows.push({
      name: `  mirror ${tool.provider.namespace}/${tool.provider.type}`,
      version: tool.version,
      path: providerMirrorBinary(tool, PROVIDER_HOSTS[0] ?? ''),
      ready: mirrored,
      required: true,
    });
  }
}
for (const tool of PY_TOOLS) {
  const path = pyToolPath(tool.name);
  const installed = existsSync(path);
  rows.push({
    name: tool.name,
    version: installed ? `${tool.version} (PyPI ${tool.requirement})` : `${tool.version}: missing`,
    path,
    ready: installed,
    required: true,
  });
}
rows.push({
  name: 'engine CLI config',
  version: 'filesystem mirror only',
  path: cliConfigPath(),
  ready: existsSync(cliConfigPath()),
  required: true,
});

/** @param {string} host @param {number} port */
function listening(host, port) {
  return new Promise((resolve) => {
    const s = connect({ host, port, timeout: 500 });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

const services = [
  ['Temporal frontend', 7233],
  ['Temporal Web UI', 8233],
  ['object store', 4568],
  ['metadata store', 5433],
  ['git host', 8443],
  ['API', 8787],
];

const pad = (/** @type {string} */ s, /** @type {number} */ n) =>
  s.length > n ? s : s + ' '.repeat(n - s.length);
console.log(`Kumoss doctor — tool cache ${toolsDir()}\n`);
console.log(`${pad('component', 28)} ${pad('ready', 8)} ${pad('version', 60)} path`);
for (const r of rows) {
  const state = r.ready ? 'yes' : r.required ? 'MISSING' : 'no';
  console.log(`${pad(r.name, 28)} ${pad(state, 8)} ${pad(r.version, 60)} ${r.path}`);
}
console.log('\nservices of `npm start` (default ports):');
for (const [name, port] of services) {
  const up = await listening('127.0.0.1', Number(port));
  console.log(`  ${pad(String(name), 20)} 127.0.0.1:${port}  ${up ? 'running' : 'not running'}`);
}
const missing = rows.filter((r) => r.required && !r.ready);
if (missing.length > 0) {
  console.log(
    `\n${missing.length} required component(s) missing: run \`npm run setup\` (or \`npm start\` / \`npm test\`).`,
  );
  process.exit(1);
}
console.log('\nall required components are installed');
