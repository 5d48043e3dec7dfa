// diff_history: the session branch's own changes, mapped to the resources they touch. The report
// names a remediated resource only from here. A changed line inside a resource block names that
// resource (with its module path); a changed variable default, tfvars entry, local or module call
// argument names the resources whose values come from it.
import { posix } from 'node:path';
import type { GitClient } from './git';
import { blockLabels, topBlocks, type HclNode } from './hcl';
import { attributeName, attributeNodes, bodyOf, modulePrefixes, TerraformConfig } from './terraform-config';

export interface DiffHistory {
  base: string;
  head: string;
  files: string[];
  /** address → files whose changed lines fall inside that resource block or a value it uses */
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

const CONFIG_FILE = /\.(tf|tfvars)$/;
const REF = /(?<![A-Za-z0-9_.-])(var|local)\.([A-Za-z_][A-Za-z0-9_-]*)/g;

function refs(text: string): { vars: Set<string>; locals: Set<string> } {
  const vars = new Set<string>();
  const locals = new Set<string>();
  for (const m of text.matchAll(REF)) (m[1] === 'var' ? vars : locals).add(m[2] as string);
  return { vars, locals };
}

const within = (n: HclNode, from: number, to: number) =>
  n.startPosition.row + 1 <= to && n.endPosition.row + 1 >= from;

/** The configuration (root and its local modules) as it was at `rev`, paths relative to the root. */
async function configAt(git: GitClient, dir: string, rev: string, iacPath: string): Promise<TerraformConfig> {
  const listed = (await git.run(['ls-tree', '-r', '--name-only', rev], dir))
    .split('\n')
    .filter((f) => CONFIG_FILE.test(f));
  const root = iacPath && iacPath !== '.' ? posix.normalize(iacPath) : '.';
  const files = new Map<string, string>();
  for (const f of listed) files.set(posix.relative(root, f), f);
  // The files of each module the configuration reaches, read by one `cat-file --batch` per module
  // directory (not one `git show` per file; the rest of the repository is never read).
  return TerraformConfig.load(async (moduleDir) => {
    const wanted = [...files].filter(([rel]) => posix.dirname(rel) === (moduleDir || '.'));
    const blobs = await git.readFiles(
      dir,
      rev,
      wanted.map(([, path]) => path),
    );
    return new Map(wanted.map(([rel, path]) => [rel, blobs.get(path) ?? '']));
  });
}

/**
 * The resource addresses whose code or values lie on lines `from`–`to` of `file` in `config`.
 */
async function touched(
  config: TerraformConfig,
  file: string,
  from: number,
  to: number,
): Promise<Set<string>> {
  const out = new Set<string>();
  if (!config.files.has(file)) return out;
  const dir = posix.dirname(file) === '.' ? '' : posix.dirname(file);
  const pre = await modulePrefixes(config);
  // What changed: resource blocks directly; variables, locals and module arguments by name.
  const direct: { dir: string; address: string }[] = [];
  const vars = new Set<string>();
  const locals = new Set<string>();
  const moduleArgs: { dir: string; vars: Set<string> }[] = [];
  const root = await config.tree(file);
  if (file.endsWith('.tfvars')) {
    const body = root.namedChildren.find((c) => c?.type === 'body') ?? undefined;
    for (const a of attributeNodes(body)) if (within(a, from, to)) vars.add(attributeName(a));
  } else {
    for (const b of topBlocks(root)) {
      if (!within(b, from, to)) continue;
      const { kind, labels } = blockLabels(b);
      if (kind === 'resource' && labels.length === 2)
        direct.push({ dir, address: `${labels[0]}.${labels[1]}` });
      else if (kind === 'variable' && labels[0]) vars.add(labels[0]);
      else if (kind === 'locals') {
        for (const a of attributeNodes(bodyOf(b))) if (within(a, from, to)) locals.add(attributeName(a));
      } else if (kind === 'module' && labels[0]) {
        const call = (await config.moduleCalls(dir)).find((c) => c.name === labels[0]);
        if (call?.dir !== undefined) {
          const args = new Set<string>();
          for (const a of attributeNodes(bodyOf(b))) if (within(a, from, to)) args.add(attributeName(a));
          moduleArgs.push({ dir: call.dir, vars: args });
        }
      }
    }
  }
  const dependents = async (moduleDir: string, v: Set<string>, l: Set<string>) => {
    // locals that use the changed names, transitively
    const allLocals = new Map<string, string>();
    for (const b of await config.blocks(moduleDir, 'locals'))
      for (const a of attributeNodes(bodyOf(b.node))) allLocals.set(attributeName(a), a.text);
    for (let grew = true; grew;) {
      grew = false;
      for (const [name, text] of allLocals) {
        if (l.has(name)) continue;
        const r = refs(text);
        if ([...r.vars].some((x) => v.has(x)) || [...r.locals].some((x) => l.has(x))) {
          l.add(name);
          grew = true;
        }
      }
    }
    for (const b of await config.blocks(moduleDir, 'resource')) {
      const r = refs(b.node.text);
      if ([...r.vars].some((x) => v.has(x)) || [...r.locals].some((x) => l.has(x)))
        direct.push({ dir: moduleDir, address: `${b.labels[0]}.${b.labels[1]}` });
    }
    // module arguments that pass the changed values on
    for (const b of await config.blocks(moduleDir, 'module')) {
      const call = (await config.moduleCalls(moduleDir)).find((c) => c.name === b.labels[0]);
      if (call?.dir === undefined) continue;
      const passed = new Set<string>();
      for (const a of attributeNodes(bodyOf(b.node))) {
        const r = refs(a.text);
        if ([...r.vars].some((x) => v.has(x)) || [...r.locals].some((x) => l.has(x)))
          passed.add(attributeName(a));
      }
      if (passed.size > 0) moduleArgs.push({ dir: call.dir, vars: passed });
    }
  };
  if (vars.size > 0 || locals.size > 0) await dependents(dir, vars, locals);
  for (let i = 0; i < moduleArgs.length && i < 50; i++) {
    const m = moduleArgs[i] as { dir: string; vars: Set<string> };
    await dependents(m.dir, m.vars, new Set());
  }
  for (const d of direct) for (const p of pre.get(d.dir) ?? []) out.add(`${p}${d.address}`);
  return out;
}

/** Changes between `base` and HEAD of the root at `iacPath` and its local modules, by resource address. */
export async function diffHistory(
  git: GitClient,
  dir: string,
  base: string,
  iacPath: string,
): Promise<DiffHistory> {
  // HEAD does not move while the report is written: its sha, both configurations and the diff of
  // every configuration file are read side by side; the diff is then narrowed to the files the
  // root reaches.
  const configs = [configAt(git, dir, base, iacPath), configAt(git, dir, 'HEAD', iacPath)] as const;
  let read;
  try {
    read = await Promise.all([
      git.head(dir),
      ...configs,
      git.run(
        ['diff', '--unified=0', '--no-color', '--no-renames', `${base}..HEAD`, '--', '*.tf', '*.tfvars'],
        dir,
      ),
    ]);
  } catch (err) {
    // A configuration read beside the one that failed still frees its syntax trees.
    for (const c of configs)
      void c.then(
        (config) => config.dispose(),
        () => undefined,
      );
    throw err;
  }
  const [head, before, after, diff] = read;
  try {
    return await touchedResources(before, after, base, head, diff, iacPath);
  } finally {
    before.dispose();
    after.dispose();
  }
}

/** The resources the unified `diff` touches in `before` and `after`, by address. */
async function touchedResources(
  before: TerraformConfig,
  after: TerraformConfig,
  base: string,
  head: string,
  diff: string,
  iacPath: string,
): Promise<DiffHistory> {
  const root = iacPath && iacPath !== '.' ? posix.normalize(iacPath) : '.';
  const paths = new Set(
    [...before.files.keys(), ...after.files.keys()].map((p) => posix.normalize(posix.join(root, p))),
  );
  const resources = new Map<string, Set<string>>();
  const files = new Set<string>();
  for (const h of parseUnifiedDiff(diff)) {
    if (!CONFIG_FILE.test(h.file) || !paths.has(h.file)) continue;
    files.add(h.file);
    const rel = posix.relative(root, h.file);
    const hits = new Set<string>();
    if (h.newCount > 0)
      for (const a of await touched(after, rel, h.newStart, h.newStart + h.newCount - 1)) hits.add(a);
    if (h.oldCount > 0)
      for (const a of await touched(before, rel, h.oldStart, h.oldStart + h.oldCount - 1)) hits.add(a);
    for (const a of hits) {
      const set = resources.get(a) ?? new Set<string>();
      set.add(h.file);
      resources.set(a, set);
    }
  }
  return { base, head, files: [...files].sort(), resources };
}
