// Reading and editing Terraform HCL precisely: tree-sitter's HCL grammar (WASM, no native build)
// gives blocks and attributes with offsets, so an edit replaces one attribute's value and keeps
// the rest of the file — comments and formatting — as it was.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Language, Parser, type Edit, type Node, type Tree } from 'web-tree-sitter';

let parserPromise: Promise<Parser> | undefined;

async function parser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    const require = createRequire(import.meta.url);
    const dir = dirname(require.resolve('@tree-sitter-grammars/tree-sitter-hcl/package.json'));
    const lang = await Language.load(join(dir, 'tree-sitter-terraform.wasm'));
    const p = new Parser();
    p.setLanguage(lang);
    return p;
  })();
  return parserPromise;
}

/**
 * The syntax tree of one HCL file (tree-sitter's terraform grammar). It lives in the parser's WASM
 * memory, which the garbage collector never sees: its owner calls `delete()` once no node of it is
 * in use (an undeleted tree of a 9 KiB file holds ~0.8 MiB for the life of the process).
 */
export async function parseHclTree(text: string, from?: { text: string; tree: Tree }): Promise<Tree> {
  const p = await parser();
  // A parse holds the event loop (~40 ms for 27 KB): what waits on I/O goes first — a root's files
  // parsed one after another leave the engine's init to start beside them, heartbeats to go out.
  await new Promise<void>((resolve) => setImmediate(resolve));
  // From an earlier text's tree: tree-sitter reuses what lies outside the changed range (a copy of
  // it told of the change: the earlier tree stays as it was for whoever else holds it).
  const old = from ? from.tree.copy() : undefined;
  try {
    if (old && from) old.edit(textEdit(from.text, text));
    const tree = p.parse(text, old ?? null);
    if (!tree) throw new Error('tree-sitter returned no tree');
    return tree;
  } finally {
    old?.delete();
  }
}

/**
 * The one range where `after` differs from `before` (their common start and end left out), as
 * tree-sitter's edit: indices and columns in UTF-16 code units, as web-tree-sitter counts them.
 */
export function textEdit(before: string, after: string): Edit {
  const most = Math.min(before.length, after.length);
  let start = 0;
  while (start < most && before.charCodeAt(start) === after.charCodeAt(start)) start += 1;
  let tail = 0;
  while (
    tail < most - start &&
    before.charCodeAt(before.length - 1 - tail) === after.charCodeAt(after.length - 1 - tail)
  )
    tail += 1;
  const point = (text: string, index: number) => {
    let row = 0;
    let lineStart = 0;
    for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) {
      row += 1;
      lineStart = i + 1;
    }
    return { row, column: index - lineStart };
  };
  return {
    startIndex: start,
    oldEndIndex: before.length - tail,
    newEndIndex: after.length - tail,
    startPosition: point(before, start),
    oldEndPosition: point(before, before.length - tail),
    newEndPosition: point(after, after.length - tail),
  };
}

/** `use` of the syntax tree of one HCL file, deleted once `use` is done (nodes must not escape it). */
export async function withHcl<T>(text: string, use: (root: Node) => T | Promise<T>): Promise<T> {
  const tree = await parseHclTree(text);
  try {
    return await use(tree.rootNode);
  } finally {
    tree.delete();
  }
}

export type { Node as HclNode };

export function labelText(n: Node): string {
  return n.type === 'string_lit' ? n.text.slice(1, -1) : n.text;
}

export function blockLabels(block: Node): { kind: string; labels: string[] } {
  const kind = block.namedChildren.find((c) => c?.type === 'identifier')?.text ?? '';
  const labels = block.namedChildren
    .filter((c): c is Node => c?.type === 'string_lit' || false)
    .map(labelText);
  return { kind, labels };
}

export function topBlocks(root: Node): Node[] {
  const body = root.namedChildren.find((c) => c?.type === 'body');
  return (body?.namedChildren ?? []).filter((c): c is Node => c?.type === 'block');
}

/** Syntax errors tree-sitter found (empty when the file parses). */
export async function syntaxErrors(text: string): Promise<string[]> {
  const errors: string[] = [];
  const walk = (n: Node): void => {
    if (n.type === 'ERROR' || n.isMissing)
      errors.push(`line ${n.startPosition.row + 1}: unexpected ${JSON.stringify(n.text.slice(0, 40))}`);
    for (const c of n.children) if (c) walk(c);
  };
  await withHcl(text, walk);
  return errors;
}

export function hclString(s: string): string {
  const escaped = JSON.stringify(s)
    .slice(1, -1)
    .replace(/\$\{/g, () => '$${')
    .replace(/%\{/g, () => '%%{');
  return `"${escaped}"`;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/**
 * Renders a JSON value as an HCL literal expression. `order` is a value whose key order to keep
 * (the declared value), so a rewritten object stays close to what a person wrote.
 */
export function renderHcl(value: unknown, indent = 0, order?: unknown): string {
  const pad = (n: number) => ' '.repeat(n);
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return hclString(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    if (value.every((v) => v === null || typeof v !== 'object')) {
      const inline = `[${value.map((v) => renderHcl(v)).join(', ')}]`;
      if (inline.length <= 80) return inline;
    }
    const ord = Array.isArray(order) ? order : [];
    const items = value.map((v, i) => `${pad(indent + 2)}${renderHcl(v, indent + 2, ord[i])},`);
    return `[\n${items.join('\n')}\n${pad(indent)}]`;
  }
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const known = order && typeof order === 'object' && !Array.isArray(order) ? Object.keys(order) : [];
    const keys = [...known.filter((k) => k in obj), ...Object.keys(obj).filter((k) => !known.includes(k))];
    if (keys.length === 0) return '{}';
    const width = Math.max(...keys.map((k) => (IDENT.test(k) ? k.length : hclString(k).length)));
    const lines = keys.map((k) => {
      const key = IDENT.test(k) ? k : hclString(k);
      const sub = (order as Record<string, unknown> | undefined)?.[k];
      return `${pad(indent + 2)}${key.padEnd(width)} = ${renderHcl(obj[k], indent + 2, sub)}`;
    });
    return `{\n${lines.join('\n')}\n${pad(indent)}}`;
  }
  return 'null';
}
