// Where a model's edit may land. A model answer is data written by someone who may want what they
// should not have: a path is checked against the checkout on disk, not only as text. Refused: a
// path outside the repository's checkout; anything inside `.git/` (hooks, `config` with
// `core.fsmonitor` — which the next `git add` would run) or `.terraform/` (providers, modules,
// backend settings); the override file Kumoss-managed state writes; and any path that passes
// through a symbolic link, checked component by component (a committed link to `/` or to another
// checkout would otherwise carry the write outside).
import { lstatSync } from 'node:fs';
import { isAbsolute, join, normalize, relative, sep } from 'node:path';
import { MANAGED_BACKEND_FILE } from './managed-state';

export class ModelEditRefused extends Error {
  override name = 'ModelEditRefused';
}

const PROTECTED_DIRS = new Set(['.git', '.terraform']);

/**
 * The absolute path an edit of `path` (relative to the IaC root `iacDir`) writes, after checking it
 * stays inside `repoDir` and reaches no protected place; throws {@link ModelEditRefused} with the
 * reason otherwise.
 */
export function confinedEditTarget(repoDir: string, iacDir: string, path: string): string {
  if (path.includes('\0'))
    throw new ModelEditRefused(`The model proposed an unreadable path: ${JSON.stringify(path)}`);
  const target = normalize(join(iacDir, path));
  const rel = relative(repoDir, target);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new ModelEditRefused(`The model proposed a file outside the repository: ${path}`);
  }
  const parts = rel.split(sep);
  const guarded = parts.find((p) => PROTECTED_DIRS.has(p.toLowerCase()));
  if (guarded) throw new ModelEditRefused(`The model proposed a file inside ${guarded}/: ${path}`);
  if (parts.at(-1) === MANAGED_BACKEND_FILE) {
    throw new ModelEditRefused(`The model proposed Kumoss's own state override file: ${path}`);
  }
  let at = repoDir;
  for (const part of parts) {
    at = join(at, part);
    let stat;
    try {
      stat = lstatSync(at);
    } catch {
      break; // does not exist yet: what follows is created as plain directories and a file
    }
    if (stat.isSymbolicLink()) {
      throw new ModelEditRefused(
        `The model proposed a path through a symbolic link (${relative(repoDir, at)}): ${path}`,
      );
    }
  }
  return target;
}
