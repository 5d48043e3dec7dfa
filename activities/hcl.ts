// Reading and editing Terraform HCL precisely: tree-sitter's HCL grammar (WASM, no native build)
// gives blocks and attributes with offsets, so an edit replaces one attribute's value and keeps
// the rest of the file — comments and formatting — as it was.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Language, Parser, type Node } from 'web-tree-sitter';

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

export interface ResourceBlock {
  type: string;
  name: string;
  /** `TYPE.NAME` (root module). */
  address: string;
  start: number;
  end: number;
  startLine: number;
  endLine: number;
}

/** The syntax tree of one HCL file (tree-sitter's terraform grammar). */
export async function parseHcl(text: string): Promise<Node> {
  const tree = (await parser()).parse(text);
  if (!tree) throw new Error('tree-sitter returned no tree');
  return tree.rootNode;
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

/** Managed resources declared in one file. */
export async function listResources(text: string): Promise<ResourceBlock[]> {
  const tree = (await parser()).parse(text);
  if (!tree) return [];
  const out: ResourceBlock[] = [];
  for (const b of topBlocks(tree.rootNode)) {
    const { kind, labels } = blockLabels(b);
    if (kind !== 'resource' || labels.length !== 2) continue;
    const [type, name] = labels as [string, string];
    out.push({
      type,
      name,
      address: `${type}.${name}`,
      start: b.startIndex,
      end: b.endIndex,
      startLine: b.startPosition.row + 1,
      endLine: b.endPosition.row + 1,
    });
  }
  return out;
}

/** Syntax errors tree-sitter found (empty when the file parses). */
export async function syntaxErrors(text: string): Promise<string[]> {
  const tree = (await parser()).parse(text);
  const errors: string[] = [];
  const walk = (n: Node): void => {
    if (n.type === 'ERROR' || n.isMissing)
      errors.push(`line ${n.startPosition.row + 1}: unexpected ${JSON.stringify(n.text.slice(0, 40))}`);
    for (const c of n.children) if (c) walk(c);
  };
  if (tree) walk(tree.rootNode);
  return errors;
}

/** Node types an expression may contain and still be a pure literal (safe to overwrite). */
const LITERAL_TYPES = new Set([
  'expression',
  'literal_value',
  'string_lit',
  'quoted_template_start',
  'quoted_template_end',
  'template_literal',
  'numeric_lit',
  'bool_lit',
  'null_lit',
  'collection_value',
  'tuple',
  'tuple_start',
  'tuple_end',
  'object',
  'object_start',
  'object_end',
  'object_elem',
  'comment',
]);

export function isLiteral(n: Node, allowJsonencode: boolean): boolean {
  if (n.type === 'function_call') {
    const fn = n.namedChildren.find((c) => c?.type === 'identifier')?.text;
    const args = n.namedChildren.find((c) => c?.type === 'function_arguments');
    const exprs = (args?.namedChildren ?? []).filter((c): c is Node => c?.type === 'expression' || false);
    return allowJsonencode && fn === 'jsonencode' && exprs.length === 1 && isLiteral(exprs[0] as Node, false);
  }
  if (n.type === 'object_elem') {
    // The key may be a bare identifier (parsed as a variable expression); the value must be literal.
    const [key, value] = n.namedChildren.filter((c): c is Node => c?.type === 'expression' || false);
    const keyOk =
      key !== undefined && (key.namedChildren[0]?.type === 'variable_expr' || isLiteral(key, false));
    return keyOk && value !== undefined && isLiteral(value, false);
  }
  if (!LITERAL_TYPES.has(n.type)) return false;
  return n.namedChildren.every((c) => c === null || isLiteral(c, allowJsonencode));
}

export interface AttributeLocation {
  /** Offsets of the value expression. */
  start: number;
  end: number;
  text: string;
  /** The value is literal (or jsonencode of a literal): safe to replace with another literal. */
  literal: boolean;
  /** The value is `jsonencode(…)`. */
  jsonencoded: boolean;
  /** Column of the attribute name, for indenting a multi-line value. */
  indent: number;
}

/** Finds `attr = …` directly in the body of `resource "type" "name"`. */
export async function findAttribute(
  text: string,
  type: string,
  name: string,
  attr: string,
): Promise<AttributeLocation | undefined> {
  const tree = (await parser()).parse(text);
  if (!tree) return undefined;
  for (const b of topBlocks(tree.rootNode)) {
    const { kind, labels } = blockLabels(b);
    if (kind !== 'resource' || labels[0] !== type || labels[1] !== name) continue;
    const body = b.namedChildren.find((c) => c?.type === 'body');
    for (const a of body?.namedChildren ?? []) {
      if (a?.type !== 'attribute') continue;
      if (a.namedChildren.find((c) => c?.type === 'identifier')?.text !== attr) continue;
      const expr = a.namedChildren.find((c) => c?.type === 'expression');
      if (!expr) return undefined;
      const fn = expr.namedChildren[0];
      return {
        start: expr.startIndex,
        end: expr.endIndex,
        text: expr.text,
        literal: isLiteral(expr, true),
        jsonencoded: fn?.type === 'function_call' && fn.namedChildren[0]?.text === 'jsonencode',
        indent: a.startPosition.column,
      };
    }
  }
  return undefined;
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

/** Replaces the text between `start` and `end`. */
export function splice(text: string, start: number, end: number, replacement: string): string {
  return `${text.slice(0, start)}${replacement}${text.slice(end)}`;
}
