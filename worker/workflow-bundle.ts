// The worker's workflow bundle, built once for each version of what goes into it and kept in the
// cache outside the clone: a worker that starts on code it has bundled before loads the bundle
// instead of running webpack again (seconds of every start).
//
// What goes in: workflows/ and the sandbox-safe modules of shared/ it imports (lint keeps workflow
// code to those and @temporalio/workflow), and the packages package-lock.json pins. The key hashes
// every file of those two directories and the lockfile, so any change to them bundles again.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { projectRoot } from '../shared/infra/config';
import { cacheDir, hashFiles } from '../shared/infra/tools.mjs';

/** Bundles kept in the cache, this one included. */
const KEEP = 4;

/** What the bundle is built from, relative to the project's root. */
const INPUTS = ['workflows', 'shared', 'package-lock.json'];

/** Every file under `path`, sorted, as paths relative to `root`. */
function filesOf(root: string, path: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(rel, e.name));
      else if (e.isFile()) out.push(join(rel, e.name));
    }
  };
  if (existsSync(join(root, path))) walk(path);
  return out.sort();
}

/** The bundle's key: a hash of the entry point and of every file it can be built from. */
export function workflowBundleKey(workflowsPath: string, root = projectRoot): string {
  const files = INPUTS.flatMap((input) => (input.endsWith('.json') ? [input] : filesOf(root, input)));
  const hash = createHash('sha256').update(`${relative(root, workflowsPath)}\0`);
  return hashFiles(hash, root, files).digest('hex').slice(0, 32);
}

export function workflowBundleDir(): string {
  return join(cacheDir(), 'workflow-bundles');
}

/**
 * The path of the bundle of `workflowsPath` for the code as it is now: the cached one, else one
 * built now and cached (written whole, then renamed into place; bundles of other versions are
 * removed).
 */
export async function cachedWorkflowBundle(
  workflowsPath: string,
  opts: { root?: string; dir?: string } = {},
): Promise<{ path: string; built: boolean }> {
  const dir = opts.dir ?? workflowBundleDir();
  const key = workflowBundleKey(workflowsPath, opts.root ?? projectRoot);
  const path = join(dir, `${key}.js`);
  if (existsSync(path)) return { path, built: false };
  const { code } = await bundleWorkflowCode({ workflowsPath });
  mkdirSync(dir, { recursive: true });
  const staging = `${path}.${process.pid}.tmp`;
  writeFileSync(staging, code);
  renameSync(staging, path);
  // The most recent few stay (another clone on the same cache may run another version).
  const others = readdirSync(dir)
    .filter((f) => f.endsWith('.js') && f !== `${key}.js`)
    .map((f) => ({ f, at: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.at - a.at);
  for (const { f } of others.slice(KEEP - 1)) rmSync(join(dir, f), { force: true });
  return { path, built: true };
}
