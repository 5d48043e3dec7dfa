// diff_history: the session branch's own changes, mapped to the resources they touch. The report
// names a remediated resource only from here.
import type { GitClient } from './git';
import { listResources } from './hcl';

export interface DiffHistory {
  base: string;
  head: string;
  files: string[];
  /** address → files whose changed lines fall inside that resource block */
  resources: Map<string, Set<string>>;
}

interface Hunk {
  file: string;
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
}

export function parseUnifiedDiff(diff: string): Hunk[] {
  const hunks: Hunk[] = [];
  let file = '';
  for (const line of diff.split('\n')) {
    if (line.startsWith('+++ ')) {
      file = line === '+++ /dev/null' ? '' : line.slice(4).replace(/^b\//, '');
      continue;
    }
    if (line.startsWith('--- ')) {
      if (line !== '--- /dev/null') file = line.slice(4).replace(/^a\//, '');
      continue;
    }
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (m && file) {
      hunks.push({
        file,
        oldStart: Number(m[1]),
        oldCount: m[2] === undefined ? 1 : Number(m[2]),
        newStart: Number(m[3]),
        newCount: m[4] === undefined ? 1 : Number(m[4]),
      });
    }
  }
  return hunks;
}

/** Changes between `base` and HEAD under `iacPath` (repository-relative), by resource address. */
export async function diffHistory(
  git: GitClient,
  dir: string,
  base: string,
  iacPath: string,
): Promise<DiffHistory> {
  const head = await git.head(dir);
  const scope = iacPath && iacPath !== '.' ? iacPath : '.';
  const diff = await git.run(
    ['diff', '--unified=0', '--no-color', '--no-renames', `${base}..${head}`, '--', scope],
    dir,
  );
  const hunks = parseUnifiedDiff(diff).filter((h) => h.file.endsWith('.tf'));
  const resources = new Map<string, Set<string>>();
  const files = new Set<string>();
  const cache = new Map<string, Awaited<ReturnType<typeof listResources>>>();
  const blocksAt = async (rev: string, file: string) => {
    const key = `${rev}:${file}`;
    if (!cache.has(key)) {
      let text = '';
      try {
        text = await git.run(['show', `${rev}:${file}`], dir);
      } catch {
        text = ''; // the file does not exist at that revision
      }
      cache.set(key, await listResources(text));
    }
    return cache.get(key) ?? [];
  };
  for (const h of hunks) {
    files.add(h.file);
    const touched: { rev: string; from: number; to: number }[] = [];
    if (h.newCount > 0) touched.push({ rev: head, from: h.newStart, to: h.newStart + h.newCount - 1 });
    if (h.oldCount > 0) touched.push({ rev: base, from: h.oldStart, to: h.oldStart + h.oldCount - 1 });
    for (const t of touched) {
      for (const b of await blocksAt(t.rev, h.file)) {
        if (b.startLine <= t.to && b.endLine >= t.from) {
          const set = resources.get(b.address) ?? new Set<string>();
          set.add(h.file);
          resources.set(b.address, set);
        }
      }
    }
  }
  return { base, head, files: [...files].sort(), resources };
}
