// A Terraform configuration as files: the root module, the local modules it calls (followed
// through `source = "./…"` / `"../…"`), and where each value comes from — variables and their
// tfvars entries or defaults, locals, module call arguments. Pure over a map of file texts (paths
// relative to the root module, posix), so the offline model and diff_history share it.
import { posix } from 'node:path';
import { blockLabels, parseHclTree, topBlocks, type HclNode } from './hcl';
import type { Tree } from 'web-tree-sitter';

export interface ConfigFile {
  path: string;
  content: string;
}

export interface ModuleCall {
  name: string;
  /** The `source` string as written. */
  source: string;
  /** Directory of a local module (relative to the root module), undefined for registry/git. */
  dir?: string;
  /** The calling module's directory. */
  parentDir: string;
  file: string;
  /** Called with count or for_each. */
  repeated: boolean;
}

/** Module directory of a module address (`module.a.module.b`), walking the calls from the root. */
export interface ModuleInstance {
  dir: string;
  /** The chain of calls, outermost first. */
  calls: ModuleCall[];
}

const LOCAL_SOURCE = /^\.\.?\//;

function dirOf(file: string): string {
  const d = posix.dirname(file);
  return d === '.' ? '' : d;
}

export function moduleDirOfFile(file: string): string {
  return dirOf(file);
}

/**
 * Syntax trees by text, shared by the configurations that hold them: a text is parsed once while
 * any configuration holds it (an iteration's proposals ask the model for several groups at once,
 * each reading the same files). A tree nobody holds any more lingers a while for the next step of
 * the round reading the same files (its report reads the files its proposals read), within a
 * budget of text; past it, or after a minute, it is deleted. A new text of a path is parsed from
 * the tree of that path's last text when one is alive (tree-sitter reuses what did not change).
 */
interface SharedTree {
  tree: Promise<Tree>;
  /** The tree once parsed. */
  parsed?: Tree;
  holders: number;
  /** The paths whose last text this is (lastTextOf). */
  paths: Set<string>;
  /** While nobody holds it: when it goes. */
  expiry?: NodeJS.Timeout;
}
const sharedTrees = new Map<string, SharedTree>();
/** Trees nobody holds, by text, the longest unheld first. */
const lingering = new Map<string, SharedTree>();
let lingeringChars = 0;
/** Characters of text whose trees linger unheld (a tree takes ~90 bytes of WASM memory a character). */
export const LINGER_CHARS = 512 * 1024;
const LINGER_MS = 60_000;
/** The last text parsed for each path (relative to its root), while its tree is alive. */
const lastTextOf = new Map<string, string>();
let parses = 0;

function holdTree(text: string, path: string, from?: string): Promise<Tree> {
  let e = sharedTrees.get(text);
  if (!e) {
    // The earlier text's tree is held while the new one is parsed from it.
    const base = from !== undefined ? sharedTrees.get(from) : undefined;
    const earlier = base?.parsed && from !== undefined ? { text: from, tree: base.parsed } : undefined;
    if (earlier) take(earlier.text, base as SharedTree);
    parses += 1;
    const tree = parseHclTree(text, earlier).finally(() => {
      if (earlier) releaseTree(earlier.text);
    });
    const entry: SharedTree = { tree, holders: 0, paths: new Set() };
    tree.then(
      (t) => {
        entry.parsed = t;
      },
      () => {
        if (sharedTrees.get(text) === entry) sharedTrees.delete(text);
      },
    );
    sharedTrees.set(text, entry);
    e = entry;
  }
  take(text, e);
  const previous = lastTextOf.get(path);
  if (previous !== text) {
    if (previous !== undefined) sharedTrees.get(previous)?.paths.delete(path);
    lastTextOf.set(path, text);
    e.paths.add(path);
  }
  return e.tree;
}

function take(text: string, e: SharedTree): void {
  if (e.holders === 0 && lingering.get(text) === e) {
    lingering.delete(text);
    lingeringChars -= text.length;
    clearTimeout(e.expiry);
  }
  e.holders += 1;
}

function releaseTree(text: string): void {
  const e = sharedTrees.get(text);
  if (!e) return;
  e.holders -= 1;
  if (e.holders > 0) return;
  lingering.set(text, e);
  lingeringChars += text.length;
  e.expiry = setTimeout(() => drop(text, e), LINGER_MS).unref();
  for (const [t, x] of lingering) {
    if (lingeringChars <= LINGER_CHARS) break;
    drop(t, x);
  }
}

function drop(text: string, e: SharedTree): void {
  if (lingering.get(text) !== e) return;
  lingering.delete(text);
  lingeringChars -= text.length;
  clearTimeout(e.expiry);
  if (sharedTrees.get(text) === e) sharedTrees.delete(text);
  for (const path of e.paths) if (lastTextOf.get(path) === text) lastTextOf.delete(path);
  e.tree.then(
    (t) => t.delete(),
    () => undefined,
  );
}

/** For tests: trees held by configurations now (none once every one is disposed), trees unheld, parses so far. */
export function treeCounts(): { held: number; lingering: number; lingeringChars: number; parses: number } {
  return {
    held: [...sharedTrees.values()].filter((e) => e.holders > 0).length,
    lingering: lingering.size,
    lingeringChars,
    parses,
  };
}

/** Syntax trees held by configurations now (for tests: none once every configuration is disposed). */
export function heldTreeCount(): number {
  return treeCounts().held;
}

/** Files of one module directory: its .tf files (and, for the root, its tfvars files). */
export class TerraformConfig {
  private readonly trees = new Map<string, { text: string; tree: Tree }>();
  /** Each file's top-level blocks, labelled, for the text they were read from (fileBlocks). */
  private readonly labelled = new Map<
    string,
    { text: string; blocks: { kind: string; labels: string[]; node: HclNode }[] }
  >();
  /** Every text whose tree this configuration holds (those its files had before an edit too). */
  private readonly held: string[] = [];

  constructor(readonly files: Map<string, string>) {}

  static of(files: ConfigFile[]): TerraformConfig {
    return new TerraformConfig(new Map(files.map((f) => [posix.normalize(f.path), f.content])));
  }

  /**
   * The root module and every local module it calls, transitively: `read(dir)` gives the files of
   * one module directory (paths relative to the root, posix).
   */
  static async load(
    read: (dir: string) => Promise<Map<string, string>> | Map<string, string>,
  ): Promise<TerraformConfig> {
    const config = new TerraformConfig(new Map());
    const add = async (dir: string) => {
      for (const [path, content] of await read(dir)) config.files.set(path, content);
    };
    try {
      await add('');
      const seen = new Set<string>(['']);
      for (let grew = true; grew;) {
        grew = false;
        for (const call of await config.allModuleCalls()) {
          if (call.dir === undefined || seen.has(call.dir)) continue;
          seen.add(call.dir);
          await add(call.dir);
          grew = true;
        }
      }
    } catch (err) {
      config.dispose();
      throw err;
    }
    return config;
  }

  async tree(file: string): Promise<HclNode> {
    const text = this.files.get(file);
    if (text === undefined) throw new Error(`no file ${file}`);
    const cached = this.trees.get(file);
    if (cached && cached.text === text) return cached.tree.rootNode;
    // An edited file: parsed from its tree before the edit (which this configuration still holds),
    // else from the tree of the path's last text parsed, if it is still alive.
    const tree = await holdTree(text, file, cached?.text ?? lastTextOf.get(file));
    this.held.push(text);
    this.trees.set(file, { text, tree });
    return tree.rootNode;
  }

  /**
   * Lets go of the syntax trees this configuration holds (they live in the parser's WASM memory,
   * which no garbage collector frees; a tree nobody holds is deleted): called by whoever made the
   * configuration once no node of it is in use; a later `tree()` takes them up again.
   */
  dispose(): void {
    for (const text of this.held) releaseTree(text);
    this.held.length = 0;
    this.trees.clear();
    this.labelled.clear();
  }

  /** The .tf files of a module directory ('' is the root). */
  moduleFiles(dir: string): string[] {
    return [...this.files.keys()].filter((f) => f.endsWith('.tf') && dirOf(f) === dir).sort();
  }

  /** tfvars files the engine loads automatically, in its load order (later wins). */
  tfvarsFiles(): string[] {
    const all = [...this.files.keys()].filter((f) => dirOf(f) === '');
    const auto = all.filter((f) => f.endsWith('.auto.tfvars')).sort();
    return [...(all.includes('terraform.tfvars') ? ['terraform.tfvars'] : []), ...auto];
  }

  /** Top-level blocks of a module directory, with their file. */
  async blocks(dir: string, kind?: string): Promise<{ file: string; node: HclNode; labels: string[] }[]> {
    const out: { file: string; node: HclNode; labels: string[] }[] = [];
    for (const file of this.moduleFiles(dir)) {
      // A file without the word holds no such block: it is not parsed (reading a root's module
      // calls parses only the files that may call one).
      if (kind !== undefined && !this.files.get(file)?.includes(kind)) continue;
      for (const b of await this.fileBlocks(file))
        if (kind === undefined || b.kind === kind) out.push({ file, node: b.node, labels: b.labels });
    }
    return out;
  }

  /**
   * A file's top-level blocks with their kinds and labels, read once per text (a remediation looks
   * up a block per operation; reading labels walks the tree in the parser's memory).
   */
  private async fileBlocks(file: string): Promise<{ kind: string; labels: string[]; node: HclNode }[]> {
    const text = this.files.get(file);
    const root = await this.tree(file);
    const known = this.labelled.get(file);
    if (known && known.text === text) return known.blocks;
    const blocks = topBlocks(root).map((node) => ({ ...blockLabels(node), node }));
    if (text !== undefined) this.labelled.set(file, { text, blocks });
    return blocks;
  }

  async moduleCalls(dir: string): Promise<ModuleCall[]> {
    const out: ModuleCall[] = [];
    for (const b of await this.blocks(dir, 'module')) {
      const name = b.labels[0] ?? '';
      const body = bodyOf(b.node);
      const source = attributeExpr(body, 'source');
      const sourceText = source ? stringLiteral(source) : undefined;
      const repeated =
        attributeExpr(body, 'count') !== undefined || attributeExpr(body, 'for_each') !== undefined;
      const local = sourceText !== undefined && LOCAL_SOURCE.test(sourceText);
      out.push({
        name,
        source: sourceText ?? '',
        ...(local ? { dir: posix.normalize(posix.join(dir || '.', sourceText)).replace(/^\.$/, '') } : {}),
        parentDir: dir,
        file: b.file,
        repeated,
      });
    }
    return out;
  }

  /** Every module call in the tree reachable from the root (local modules followed). */
  async allModuleCalls(): Promise<ModuleCall[]> {
    const out: ModuleCall[] = [];
    const seen = new Set<string>();
    const visit = async (dir: string, depth: number): Promise<void> => {
      if (seen.has(dir) || depth > 10) return;
      seen.add(dir);
      for (const c of await this.moduleCalls(dir)) {
        out.push(c);
        if (c.dir !== undefined) await visit(c.dir, depth + 1);
      }
    };
    await visit('', 0);
    return out;
  }

  /**
   * The module a module address (`module.a.module.b`, instance keys allowed) lives in. Throws an
   * Error whose message says why when it cannot be edited from here.
   */
  async resolveModule(moduleAddress: string | undefined): Promise<ModuleInstance> {
    if (!moduleAddress) return { dir: '', calls: [] };
    const steps = parseModuleAddress(moduleAddress);
    let dir = '';
    const calls: ModuleCall[] = [];
    for (const step of steps) {
      const call = (await this.moduleCalls(dir)).find((c) => c.name === step.name);
      if (!call) throw new Error(`The module call module.${step.name} is not declared in the configuration.`);
      if (call.dir === undefined)
        throw new Error(
          `module.${step.name} comes from ${call.source || 'a non-local source'}; its code is not in this repository.`,
        );
      calls.push(call);
      dir = call.dir;
    }
    return { dir, calls };
  }

  /** How many module blocks (anywhere in the tree) call the module in `dir`, counting repeats. */
  async callersOf(dir: string): Promise<ModuleCall[]> {
    return (await this.allModuleCalls()).filter((c) => c.dir === dir);
  }
}

export function parseModuleAddress(address: string): { name: string; key?: string }[] {
  const out: { name: string; key?: string }[] = [];
  const re = /module\.([A-Za-z0-9_-]+)(\[[^\]]*\])?/g;
  for (const m of address.matchAll(re)) {
    out.push({ name: m[1] as string, ...(m[2] ? { key: m[2].slice(1, -1) } : {}) });
  }
  return out;
}

/** `TYPE.NAME[KEY]` at the end of a resource address: the instance key, if any. */
export function instanceKey(address: string): string | number | undefined {
  const m = /\[([^\]]+)\]$/.exec(address);
  if (!m) return undefined;
  const raw = m[1] as string;
  if (/^\d+$/.test(raw)) return Number(raw);
  try {
    return JSON.parse(raw) as string;
  } catch {
    return raw;
  }
}

export function bodyOf(block: HclNode): HclNode | undefined {
  return block.namedChildren.find((c) => c?.type === 'body') ?? undefined;
}

export function attributeNodes(body: HclNode | undefined): HclNode[] {
  return (body?.namedChildren ?? []).filter((c): c is HclNode => c?.type === 'attribute');
}

export function blockNodes(body: HclNode | undefined): HclNode[] {
  return (body?.namedChildren ?? []).filter((c): c is HclNode => c?.type === 'block');
}

export function attributeName(attr: HclNode): string {
  return attr.namedChildren.find((c) => c?.type === 'identifier')?.text ?? '';
}

export function attributeExpr(body: HclNode | undefined, name: string): HclNode | undefined {
  const a = attributeNodes(body).find((n) => attributeName(n) === name);
  return a?.namedChildren.find((c) => c?.type === 'expression') ?? undefined;
}

/** The value of a plain string literal expression (no interpolation). */
export function stringLiteral(expr: HclNode): string | undefined {
  const v = evalLiteral(expr);
  return v.ok && typeof v.value === 'string' ? v.value : undefined;
}

export type Evaluated = { ok: true; value: unknown } | { ok: false };

const FAIL: Evaluated = { ok: false };

/** Evaluates a literal expression (strings without interpolation, numbers, bools, null, tuples,
 * objects, and `jsonencode`/`toset` of those) — the values Kumoss may read and rewrite. */
export function evalLiteral(n: HclNode): Evaluated {
  switch (n.type) {
    case 'expression': {
      const kids = n.namedChildren.filter((c): c is HclNode => c !== null && c.type !== 'comment');
      return kids.length === 1 ? evalLiteral(kids[0] as HclNode) : FAIL;
    }
    case 'literal_value':
    case 'collection_value': {
      const k = n.namedChildren[0];
      return k ? evalLiteral(k) : FAIL;
    }
    case 'numeric_lit':
      return { ok: true, value: Number(n.text) };
    case 'bool_lit':
      return { ok: true, value: n.text === 'true' };
    case 'null_lit':
      return { ok: true, value: null };
    case 'string_lit': {
      const parts = n.namedChildren.filter((c): c is HclNode => c !== null);
      if (
        parts.some(
          (p) =>
            p.type !== 'quoted_template_start' &&
            p.type !== 'quoted_template_end' &&
            p.type !== 'template_literal',
        )
      )
        return FAIL;
      const raw = parts.find((p) => p.type === 'template_literal')?.text ?? '';
      try {
        return {
          ok: true,
          value: JSON.parse(`"${raw.replace(/\$\$\{/g, '${').replace(/%%\{/g, '%{')}"`) as string,
        };
      } catch {
        return FAIL;
      }
    }
    case 'tuple': {
      const out: unknown[] = [];
      for (const c of n.namedChildren) {
        if (!c || c.type !== 'expression') continue;
        const v = evalLiteral(c);
        if (!v.ok) return FAIL;
        out.push(v.value);
      }
      return { ok: true, value: out };
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const e of n.namedChildren) {
        if (!e || e.type !== 'object_elem') continue;
        const key = objectElemKey(e);
        const valueNode = e.namedChildren.filter((c) => c?.type === 'expression')[1];
        if (key === undefined || !valueNode) return FAIL;
        const v = evalLiteral(valueNode);
        if (!v.ok) return FAIL;
        out[key] = v.value;
      }
      return { ok: true, value: out };
    }
    case 'function_call': {
      const fn = n.namedChildren.find((c) => c?.type === 'identifier')?.text;
      const args = n.namedChildren.find((c) => c?.type === 'function_arguments');
      const exprs = (args?.namedChildren ?? []).filter((c): c is HclNode => c?.type === 'expression');
      if (exprs.length !== 1) return FAIL;
      const v = evalLiteral(exprs[0] as HclNode);
      if (!v.ok) return FAIL;
      if (fn === 'jsonencode') return { ok: true, value: JSON.stringify(v.value) };
      if (fn === 'toset' && Array.isArray(v.value)) return v;
      return FAIL;
    }
    default:
      return FAIL;
  }
}

/** The key of an object element: a bare identifier or a string literal. */
export function objectElemKey(elem: HclNode): string | undefined {
  const keyNode = elem.namedChildren.find((c) => c?.type === 'expression');
  if (!keyNode) return undefined;
  const first = keyNode.namedChildren[0];
  if (first?.type === 'variable_expr' && keyNode.namedChildren.length === 1) return first.text;
  const v = evalLiteral(keyNode);
  return v.ok && typeof v.value === 'string' ? v.value : undefined;
}

/** A reference such as `var.x.y`, `local.a`, `each.value.env`: the root name and the attribute path. */
export interface Reference {
  root: string;
  parts: string[];
}

export function referenceOf(expr: HclNode): Reference | undefined {
  if (expr.type !== 'expression') return undefined;
  const kids = expr.namedChildren.filter((c): c is HclNode => c !== null && c.type !== 'comment');
  const head = kids[0];
  if (head?.type !== 'variable_expr') return undefined;
  const parts: string[] = [];
  for (const k of kids.slice(1)) {
    if (k.type === 'get_attr') {
      parts.push(k.namedChildren.find((c) => c?.type === 'identifier')?.text ?? '');
    } else if (k.type === 'index') {
      const inner = k.namedChildren.find((c) => c?.type === 'expression');
      const v = inner ? evalLiteral(inner) : FAIL;
      if (!v.ok || (typeof v.value !== 'string' && typeof v.value !== 'number')) return undefined;
      parts.push(String(v.value));
    } else return undefined;
  }
  return { root: head.text, parts };
}

/** Occurrences of `prefix.name` as a reference in a module's files, outside `skip` blocks. */
export async function countReferences(
  config: TerraformConfig,
  dir: string,
  prefix: 'var' | 'local',
  name: string,
): Promise<number> {
  const re = new RegExp(
    `(?<![A-Za-z0-9_.-])${prefix}\\.${name.replace(/[-]/g, '\\-')}(?![A-Za-z0-9_-])`,
    'g',
  );
  let n = 0;
  for (const file of config.moduleFiles(dir)) {
    for (const b of topBlocks(await config.tree(file))) {
      const { kind } = blockLabels(b);
      if (kind === 'variable') continue; // a variable's own validation does not use its value
      n += [...b.text.matchAll(re)].length;
    }
  }
  return n;
}

/** Module address prefixes (`module.a.module.b.`) of every call of each module directory. */
export async function modulePrefixes(config: TerraformConfig): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>([['', ['']]]);
  const calls = await config.allModuleCalls();
  for (let changed = true; changed;) {
    changed = false;
    for (const c of calls) {
      if (c.dir === undefined) continue;
      const parents = out.get(c.parentDir);
      if (!parents) continue;
      const mine = new Set(out.get(c.dir) ?? []);
      for (const p of parents) {
        const next = `${p}module.${c.name}.`;
        if (!mine.has(next)) {
          mine.add(next);
          changed = true;
        }
      }
      out.set(c.dir, [...mine]);
    }
  }
  return out;
}
