// Rewrites Terraform code so that it declares what a drifted resource really holds, the way a
// person would: the one value that changed — in the resource, in its nested blocks, in the module
// file, the tfvars entry or variable default, the local, or the for_each entry it comes from —
// keeping every other line, comment and block as it was. What cannot be rewritten that way throws
// `Unfixable` with the reason a person needs.
import { deepEqual, holdsSensitive, SENSITIVE, type DriftOperation } from '../shared/drift';
import { blockLabels, hclString, renderHcl, type HclNode } from './hcl';
import {
  attributeExpr,
  attributeName,
  attributeNodes,
  blockNodes,
  bodyOf,
  countReferences,
  evalLiteral,
  instanceKey,
  objectElemKey,
  referenceOf,
  type TerraformConfig,
} from './terraform-config';

export class Unfixable extends Error {
  override name = 'Unfixable';
}

export interface TextEdit {
  file: string;
  start: number;
  end: number;
  text: string;
}

/** Where an expression lives, and the module it is evaluated in. */
interface Site {
  file: string;
  node: HclNode;
  dir: string;
}

interface Scope {
  /** The resource's `count`/`for_each` (absent: a single instance). */
  repetition?: { kind: 'count' | 'for_each'; instances: number; forEach?: Site };
  /** Every instance drifted the same way: an edit shared by all of them is right for each. */
  allInstancesAlike: boolean;
  /** How many instances drifted (for the reason). */
  driftedInstances: number;
  key: string | number | undefined;
  address: string;
}

/** null, "", [], {} and false are what an unset optional attribute reads back as. */
export function isEmptyish(v: unknown): boolean {
  return (
    v === null ||
    v === undefined ||
    v === '' ||
    v === false ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0)
  );
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function lineStart(text: string, offset: number): number {
  return text.lastIndexOf('\n', offset - 1) + 1;
}

function indentAt(text: string, offset: number): number {
  const start = lineStart(text, offset);
  let i = start;
  while (text[i] === ' ' || text[i] === '\t') i++;
  return i - start;
}

/** The value expression of an object element. */
function elemValue(elem: HclNode): HclNode | undefined {
  return elem.namedChildren.filter((c) => c?.type === 'expression')[1] ?? undefined;
}

function unwrap(expr: HclNode): HclNode {
  // expression → collection_value → object|tuple ; expression → function_call
  let n: HclNode = expr;
  for (;;) {
    const kids = n.namedChildren.filter((c): c is HclNode => c !== null && c.type !== 'comment');
    if ((n.type === 'expression' || n.type === 'collection_value') && kids.length === 1)
      n = kids[0] as HclNode;
    else return n;
  }
}

const keyText = (k: string) => (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(k) ? k : hclString(k));

/** Renders a block (and nested blocks for lists of objects) from a value, omitting unset values. */
function renderBlock(name: string, value: Record<string, unknown>, indent: number, order: string[]): string {
  const pad = ' '.repeat(indent);
  const keys = [
    ...order.filter((k) => k in value),
    ...Object.keys(value)
      .filter((k) => !order.includes(k))
      .sort(),
  ].filter((k) => !isEmptyish(value[k]));
  const attrs = keys.filter((k) => !isListOfObjects(value[k]));
  const nested = keys.filter((k) => isListOfObjects(value[k]));
  const width = Math.max(0, ...attrs.map((k) => keyText(k).length));
  const lines = attrs.map((k) => `${pad}  ${keyText(k).padEnd(width)} = ${renderHcl(value[k], indent + 2)}`);
  for (const k of nested) {
    for (const item of value[k] as Record<string, unknown>[])
      lines.push(renderBlock(k, item, indent + 2, []));
  }
  return `${pad}${name} {\n${lines.join('\n')}\n${pad}}`;
}

function isListOfObjects(v: unknown): v is Record<string, unknown>[] {
  return Array.isArray(v) && v.length > 0 && v.every(isPlainObject);
}

/** Loose equality of a literal from the code and a value from the plan (numbers vs their text). */
function sameValue(code: unknown, plan: unknown): boolean {
  if (deepEqual(code, plan)) return true;
  if (isEmptyish(code) && isEmptyish(plan)) return true;
  if (typeof code === 'number' || typeof plan === 'number') return String(code) === String(plan);
  if (Array.isArray(code) && Array.isArray(plan))
    return code.length === plan.length && code.every((c, i) => sameValue(c, plan[i]));
  if (isPlainObject(code) && isPlainObject(plan))
    return [...new Set([...Object.keys(code), ...Object.keys(plan)])].every((k) =>
      sameValue(code[k], plan[k]),
    );
  return false;
}

/** Where a variable gets its value: the root's tfvars entry, the module call's argument, else
 * its default. */
async function variableSite(
  config: TerraformConfig,
  dir: string,
  name: string,
  label: string,
): Promise<Site> {
  if (dir === '') {
    for (const file of [...config.tfvarsFiles()].reverse()) {
      const root = await config.tree(file);
      const body = root.namedChildren.find((c) => c?.type === 'body') ?? undefined;
      const expr = attributeExpr(body, name);
      if (expr) return { file, node: expr, dir: '' };
    }
  } else {
    const call = (await config.callersOf(dir))[0];
    if (call) {
      const block = (await config.blocks(call.parentDir, 'module')).find((b) => b.labels[0] === call.name);
      const expr = block ? attributeExpr(bodyOf(block.node), name) : undefined;
      if (block && expr) return { file: block.file, node: expr, dir: call.parentDir };
    }
  }
  const decl = (await config.blocks(dir, 'variable')).find((b) => b.labels[0] === name);
  if (!decl) throw new Unfixable(`${label} comes from var.${name}, which is not declared.`);
  const def = attributeExpr(bodyOf(decl.node), 'default');
  if (!def)
    throw new Unfixable(
      `${label} comes from var.${name}, which has no default and no tfvars entry in the repository; its value is given elsewhere.`,
    );
  return { file: decl.file, node: def, dir };
}

async function localSite(config: TerraformConfig, dir: string, name: string, label: string): Promise<Site> {
  for (const b of await config.blocks(dir, 'locals')) {
    const expr = attributeExpr(bodyOf(b.node), name);
    if (expr) return { file: b.file, node: expr, dir };
  }
  throw new Unfixable(`${label} comes from local.${name}, which is not declared.`);
}

export class ConfigEditor {
  readonly edits: TextEdit[] = [];

  constructor(
    private readonly config: TerraformConfig,
    private readonly scope: Scope,
  ) {}

  private text(file: string): string {
    return this.config.files.get(file) ?? '';
  }

  private edit(site: { file: string }, start: number, end: number, text: string): void {
    if (this.text(site.file).slice(start, end) === text) return;
    this.edits.push({ file: site.file, start, end, text });
  }

  private sharedEdit(what: string): void {
    const r = this.scope.repetition;
    if (!r || this.scope.allInstancesAlike) return;
    throw new Unfixable(
      `${what} is shared by all ${r.instances} instances (${r.kind}), but only ${this.scope.driftedInstances} of them drifted this way; changing it would change the others.`,
    );
  }

  /** Makes `site` (an expression) evaluate to `actual` instead of `declared`. */
  async expr(
    site: Site,
    declared: unknown,
    actual: unknown,
    label: string,
    instanceSpecific = false,
  ): Promise<void> {
    if (deepEqual(declared, actual)) return;
    const ref = referenceOf(site.node);
    if (ref) {
      const target = await this.follow(site, ref.root, ref.parts, label);
      await this.expr(target.site, declared, actual, label, instanceSpecific || target.instanceSpecific);
      return;
    }
    const inner = unwrap(site.node);
    if (inner.type === 'object' && isPlainObject(declared) && isPlainObject(actual)) {
      await this.object(site, inner, declared, actual, label, instanceSpecific);
      return;
    }
    if (
      inner.type === 'tuple' &&
      Array.isArray(declared) &&
      Array.isArray(actual) &&
      declared.length === actual.length
    ) {
      // Same length: element by element, so one changed element is a one-line diff.
      const items = inner.namedChildren.filter((c): c is HclNode => c?.type === 'expression');
      if (items.length === declared.length) {
        for (let i = 0; i < items.length; i++)
          await this.expr(
            { ...site, node: items[i] as HclNode },
            declared[i],
            actual[i],
            `${label}[${i}]`,
            instanceSpecific,
          );
        return;
      }
    }
    if (inner.type === 'function_call' && typeof declared === 'string' && typeof actual === 'string') {
      const fn = inner.namedChildren.find((c) => c?.type === 'identifier')?.text;
      const arg = inner.namedChildren
        .find((c) => c?.type === 'function_arguments')
        ?.namedChildren.filter((c): c is HclNode => c?.type === 'expression');
      if (fn === 'jsonencode' && arg?.length === 1) {
        let dj: unknown;
        let aj: unknown;
        try {
          dj = JSON.parse(declared);
          aj = JSON.parse(actual);
        } catch {
          throw new Unfixable(
            `${label} holds a value that is not JSON; it cannot be rewritten as jsonencode.`,
          );
        }
        await this.expr({ ...site, node: arg[0] as HclNode }, dj, aj, label, instanceSpecific);
        return;
      }
    }
    if (!evalLiteral(site.node).ok) {
      throw new Unfixable(
        `${label} is computed from expressions (${site.node.text.replace(/\s+/g, ' ').slice(0, 60)}); rewriting it needs a person.`,
      );
    }
    if (!instanceSpecific) this.sharedEdit(label);
    const text = this.text(site.file);
    this.edit(
      site,
      site.node.startIndex,
      site.node.endIndex,
      renderHcl(actual, indentAt(text, site.node.startIndex), declared),
    );
  }

  private async object(
    site: Site,
    obj: HclNode,
    declared: Record<string, unknown>,
    actual: Record<string, unknown>,
    label: string,
    instanceSpecific: boolean,
  ): Promise<void> {
    const elems = obj.namedChildren.filter((c): c is HclNode => c?.type === 'object_elem');
    const text = this.text(site.file);
    const multiline = obj.startPosition.row !== obj.endPosition.row;
    const keys = [...new Set([...Object.keys(declared), ...Object.keys(actual)])];
    for (const k of keys) {
      const d = declared[k];
      const a = actual[k];
      if (deepEqual(d, a)) continue;
      const elem = elems.find((e) => objectElemKey(e) === k);
      const sub = `${label}.${k}`;
      if (elem && a !== undefined) {
        await this.expr({ ...site, node: elemValue(elem) as HclNode }, d, a, sub, instanceSpecific);
        continue;
      }
      if (!instanceSpecific) this.sharedEdit(sub);
      if (!multiline) {
        // A one-line object is rewritten whole, when it is all literal.
        if (!evalLiteral(obj).ok)
          throw new Unfixable(
            `${label} mixes literals and expressions on one line; rewriting it needs a person.`,
          );
        this.edit(
          site,
          obj.startIndex,
          obj.endIndex,
          renderHcl(actual, indentAt(text, obj.startIndex), declared),
        );
        return;
      }
      if (elem) {
        // Removed in reality: drop the element's line.
        const start = lineStart(text, elem.startIndex);
        let end = text.indexOf('\n', elem.endIndex);
        end = end < 0 ? text.length : end + 1;
        this.edit(site, start, end, '');
      } else {
        const close = obj.namedChildren.find((c) => c?.type === 'object_end') as HclNode;
        const at = lineStart(text, close.startIndex);
        const indent = elems[0] ? indentAt(text, elems[0].startIndex) : indentAt(text, close.startIndex) + 2;
        this.edit(site, at, at, `${' '.repeat(indent)}${keyText(k)} = ${renderHcl(a, indent)}\n`);
      }
    }
  }

  /** Follows a reference to the expression that gives its value. */
  private async follow(
    site: Site,
    root: string,
    parts: string[],
    label: string,
  ): Promise<{ site: Site; instanceSpecific: boolean }> {
    if (root === 'var' && parts[0]) {
      const target = await this.variable(site.dir, parts[0], label);
      return { site: await this.navigate(target, parts.slice(1), label), instanceSpecific: false };
    }
    if (root === 'local' && parts[0]) {
      const target = await this.local(site.dir, parts[0], label);
      return { site: await this.navigate(target, parts.slice(1), label), instanceSpecific: false };
    }
    if (
      root === 'each' &&
      parts[0] === 'value' &&
      this.scope.repetition?.forEach &&
      this.scope.key !== undefined
    ) {
      const target = await this.navigate(
        this.scope.repetition.forEach,
        [String(this.scope.key), ...parts.slice(1)],
        label,
      );
      return { site: target, instanceSpecific: true };
    }
    const shown = [root, ...parts].join('.');
    throw new Unfixable(
      `${label} comes from ${shown}, which Kumoss cannot rewrite to one value; rewriting it needs a person.`,
    );
  }

  /** Walks into an object/tuple literal (following references) along `parts`. */
  private async navigate(site: Site, parts: string[], label: string): Promise<Site> {
    let current = site;
    for (let i = 0; i < parts.length; i++) {
      const ref = referenceOf(current.node);
      if (ref) {
        const followed = await this.follow(current, ref.root, [...ref.parts, ...parts.slice(i)], label);
        return followed.site;
      }
      const inner = unwrap(current.node);
      const part = parts[i] as string;
      if (inner.type === 'object') {
        const elem = inner.namedChildren.find((e) => e?.type === 'object_elem' && objectElemKey(e) === part);
        const value = elem ? elemValue(elem) : undefined;
        if (!value)
          throw new Unfixable(`${label}: the entry ${JSON.stringify(part)} is not written out in the code.`);
        current = { ...current, node: value };
      } else if (inner.type === 'tuple' && /^\d+$/.test(part)) {
        const items = inner.namedChildren.filter((c): c is HclNode => c?.type === 'expression');
        const item = items[Number(part)];
        if (!item) throw new Unfixable(`${label}: element ${part} is not written out in the code.`);
        current = { ...current, node: item };
      } else {
        throw new Unfixable(
          `${label} comes from a value that is computed (${current.node.text.slice(0, 60)}); rewriting it needs a person.`,
        );
      }
    }
    return current;
  }

  private async variable(dir: string, name: string, label: string): Promise<Site> {
    const uses = await countReferences(this.config, dir, 'var', name);
    if (uses > 1)
      throw new Unfixable(
        `${label} comes from var.${name}, which is used in ${uses} places; changing it would change them all.`,
      );
    return variableSite(this.config, dir, name, label);
  }

  private async local(dir: string, name: string, label: string): Promise<Site> {
    const uses = await countReferences(this.config, dir, 'local', name);
    if (uses > 1)
      throw new Unfixable(
        `${label} comes from local.${name}, which is used in ${uses} places; changing it would change them all.`,
      );
    return localSite(this.config, dir, name, label);
  }

  /** Makes a block body declare `actual` instead of `declared` for attribute/block `name`. */
  async bodyEntry(
    file: string,
    dir: string,
    body: HclNode,
    name: string,
    declared: unknown,
    actual: unknown,
    label: string,
  ): Promise<void> {
    if (sameValue(declared, actual)) return;
    const expr = attributeExpr(body, name);
    if (expr) {
      await this.expr({ file, node: expr, dir }, declared, actual, label);
      return;
    }
    const dynamic = blockNodes(body).find((b) => {
      const { kind, labels } = blockLabels(b);
      return kind === 'dynamic' && labels[0] === name;
    });
    if (dynamic)
      throw new Unfixable(`${label} is generated by a dynamic block; rewriting it needs a person.`);
    const blocks = blockNodes(body).filter((b) => blockLabels(b).kind === name);
    if (blocks.length > 0 || (isListOfObjects(actual) && isEmptyish(declared))) {
      await this.blocks(
        file,
        dir,
        body,
        name,
        blocks,
        Array.isArray(declared) ? declared : [],
        Array.isArray(actual) ? actual : [],
        label,
      );
      return;
    }
    if (isEmptyish(actual)) return; // reality holds the unset value: nothing to write
    // Not set in the code (its default applied): write it.
    this.sharedEdit(label);
    this.insertAttribute(file, body, name, actual);
  }

  private insertAttribute(file: string, body: HclNode, name: string, value: unknown): void {
    const text = this.text(file);
    const attrs = attributeNodes(body);
    const last = attrs[attrs.length - 1];
    if (last) {
      const indent = indentAt(text, last.startIndex);
      const rendered = renderHcl(value, indent);
      // A multi-line value stands apart from the one-line attributes, as people write it.
      const gap = rendered.includes('\n') ? '\n' : '';
      this.edit(
        { file },
        last.endIndex,
        last.endIndex,
        `\n${gap}${' '.repeat(indent)}${keyText(name)} = ${rendered}`,
      );
      return;
    }
    const open = body.parent?.namedChildren.find((c) => c?.type === 'block_start');
    const at = open ? open.endIndex : body.startIndex;
    const indent = indentAt(text, body.parent?.startIndex ?? body.startIndex) + 2;
    this.edit({ file }, at, at, `\n${' '.repeat(indent)}${keyText(name)} = ${renderHcl(value, indent)}`);
  }

  /** Nested blocks (`ingress { … }`): match each block to a declared element, then edit in place,
   * remove or add blocks so the set equals reality. */
  private async blocks(
    file: string,
    dir: string,
    body: HclNode,
    name: string,
    blocks: HclNode[],
    declared: unknown[],
    actual: unknown[],
    label: string,
  ): Promise<void> {
    if (blocks.length !== declared.length)
      throw new Unfixable(
        `${label}: the ${blocks.length} ${name} block(s) in the code do not map one to one onto the ${declared.length} declared; rewriting them needs a person.`,
      );
    this.sharedEdit(label);
    const text = this.text(file);
    // Which declared element each block is.
    const candidates = blocks.map((b) =>
      declared.map((d, i) => (isPlainObject(d) && this.blockMatches(b, d) ? i : -1)).filter((i) => i >= 0),
    );
    const owner = new Map<number, HclNode>();
    const order = blocks
      .map((_, i) => i)
      .sort((x, y) => (candidates[x]?.length ?? 0) - (candidates[y]?.length ?? 0));
    for (const bi of order) {
      const free = (candidates[bi] ?? []).find((i) => !owner.has(i));
      if (free === undefined)
        throw new Unfixable(
          `${label}: cannot tell which ${name} block declares which rule (values come from expressions).`,
        );
      owner.set(free, blocks[bi] as HclNode);
    }
    const leftA = [...actual];
    const leftD: number[] = [];
    declared.forEach((d, i) => {
      const j = leftA.findIndex((a) => sameValue(a, d));
      if (j >= 0) leftA.splice(j, 1);
      else leftD.push(i);
    });
    const removed: number[] = [];
    for (const di of leftD) {
      const d = declared[di] as Record<string, unknown>;
      let best = -1;
      let bestDiff = Infinity;
      leftA.forEach((a, j) => {
        if (!isPlainObject(a)) return;
        const keys = new Set([...Object.keys(d), ...Object.keys(a)]);
        const diff = [...keys].filter((k) => !sameValue(d[k], a[k])).length;
        if (diff < bestDiff && diff <= Math.max(1, Math.floor(keys.size / 3))) {
          best = j;
          bestDiff = diff;
        }
      });
      const block = owner.get(di) as HclNode;
      if (best >= 0) {
        const a = leftA.splice(best, 1)[0] as Record<string, unknown>;
        const inner = bodyOf(block) as HclNode;
        for (const k of new Set([...Object.keys(d), ...Object.keys(a)])) {
          await this.bodyEntry(file, dir, inner, k, d[k], a[k], `${label}.${k}`);
        }
      } else removed.push(di);
    }
    for (const di of removed) {
      const block = owner.get(di) as HclNode;
      let start = lineStart(text, block.startIndex);
      let end = text.indexOf('\n', block.endIndex);
      end = end < 0 ? text.length : end + 1;
      // Keep one blank line between what was around the block, not two, and none before a `}`.
      const next = text.slice(end, text.indexOf('\n', end) < 0 ? text.length : text.indexOf('\n', end));
      if (
        start >= 2 &&
        text.slice(start - 2, start) === '\n\n' &&
        (text[end] === '\n' || next.trim() === '}')
      )
        start -= 1;
      this.edit({ file }, start, end, '');
    }
    if (leftA.length > 0) {
      const sibling = blocks[blocks.length - 1];
      const attrs = attributeNodes(body);
      const anchor = sibling ?? attrs[attrs.length - 1];
      const indent = anchor
        ? indentAt(text, anchor.startIndex)
        : indentAt(text, body.parent?.startIndex ?? 0) + 2;
      const orderKeys = sibling ? attributeNodes(bodyOf(sibling)).map(attributeName) : [];
      const at = anchor
        ? anchor.endIndex
        : (body.parent?.namedChildren.find((c) => c?.type === 'block_start')?.endIndex ?? body.startIndex);
      // A blank line before each new block when the blocks around are spaced that way (or when
      // it follows attributes).
      const gap =
        !sibling ||
        text.slice(0, lineStart(text, sibling.startIndex)).endsWith('\n\n') ||
        text.slice(sibling.endIndex).startsWith('\n\n')
          ? '\n'
          : '';
      const rendered = leftA
        .filter(isPlainObject)
        .map((a) => `\n${gap}${renderBlock(name, a, indent, orderKeys)}`)
        .join('');
      this.edit({ file }, at, at, rendered);
    }
  }

  private blockMatches(block: HclNode, element: Record<string, unknown>): boolean {
    const body = bodyOf(block);
    const set = new Set<string>();
    for (const a of attributeNodes(body)) {
      const n = attributeName(a);
      set.add(n);
      const expr = a.namedChildren.find((c) => c?.type === 'expression');
      const v = expr ? evalLiteral(expr) : { ok: false as const };
      if (v.ok && !sameValue(v.value, element[n])) return false;
    }
    for (const b of blockNodes(body)) set.add(blockLabels(b).kind);
    return Object.keys(element).every((k) => set.has(k) || isEmptyish(element[k]));
  }
}

/** Describes the instances of a resource block (count / for_each) for an operation. */
export async function repetitionOf(
  config: TerraformConfig,
  file: string,
  dir: string,
  body: HclNode,
): Promise<Scope['repetition']> {
  const count = attributeExpr(body, 'count');
  const forEach = attributeExpr(body, 'for_each');
  if (!count && !forEach) return undefined;
  const resolve = async (expr: HclNode): Promise<unknown> => {
    let site: Site = { file, node: expr, dir };
    for (let i = 0; i < 5; i++) {
      const v = evalLiteral(site.node);
      if (v.ok) return v.value;
      const ref = referenceOf(site.node);
      if (!ref || (ref.root !== 'var' && ref.root !== 'local') || !ref.parts[0] || ref.parts.length > 1)
        return undefined;
      try {
        site =
          ref.root === 'var'
            ? await variableSite(config, site.dir, ref.parts[0], 'count')
            : await localSite(config, site.dir, ref.parts[0], 'count');
      } catch {
        return undefined;
      }
    }
    return undefined;
  };
  if (count) {
    const n = await resolve(count);
    return { kind: 'count', instances: typeof n === 'number' ? n : NaN };
  }
  const value = await resolve(forEach as HclNode);
  const instances = Array.isArray(value)
    ? value.length
    : isPlainObject(value)
      ? Object.keys(value).length
      : NaN;
  // each.value edits go to the for_each expression's entries.
  return { kind: 'for_each', instances, forEach: { file, node: forEach as HclNode, dir } };
}

export { instanceKey, SENSITIVE };

/** The resource block an operation names, resolved through its modules. */
async function resourceBlock(
  config: TerraformConfig,
  op: DriftOperation,
): Promise<{ file: string; dir: string; node: HclNode }> {
  let dir: string;
  try {
    const mod = await config.resolveModule(op.module_address);
    dir = mod.dir;
    const repeated = mod.calls.find((c) => c.repeated);
    if (repeated)
      throw new Unfixable(
        `module.${repeated.name} is called with count or for_each; its code is shared by every instance.`,
      );
    if (mod.calls.length > 0) {
      const callers = await config.callersOf(dir);
      if (callers.length > 1)
        throw new Unfixable(
          `The module in ${dir} is called ${callers.length} times (${callers.map((c) => `module.${c.name}`).join(', ')}); editing it would change every call.`,
        );
    }
  } catch (err) {
    if (err instanceof Unfixable) throw err;
    throw new Unfixable(err instanceof Error ? err.message : String(err));
  }
  const block = (await config.blocks(dir, 'resource')).find(
    (b) => b.labels[0] === op.type && b.labels[1] === op.name,
  );
  if (!block)
    throw new Unfixable(
      dir
        ? `The resource is not declared in the module in ${dir}.`
        : 'The resource is not declared in the root module.',
    );
  return { file: block.file, dir, node: block.node };
}

/** The address without its instance key: every instance of one block shares it. */
export function blockAddress(address: string): string {
  return address.replace(/\[[^\]]*\]$/, '');
}

/** The changes of one top-level attribute, comparable across instances. */
function changesOf(o: DriftOperation, top: string): unknown {
  return o.changes
    .filter((c) => c.path === top || c.path.startsWith(`${top}.`))
    .map((c) => [c.path, c.declared, c.actual])
    .sort((x, y) => String(x[0]).localeCompare(String(y[0])));
}

/**
 * The edits that make the code declare what `op`'s resource really holds. `related` is every
 * operation of the iteration (to see whether all instances of a count/for_each block drifted alike).
 */
export async function reconcileOperation(
  config: TerraformConfig,
  op: DriftOperation,
  related: DriftOperation[],
): Promise<TextEdit[]> {
  const block = await resourceBlock(config, op);
  const body = bodyOf(block.node);
  if (!body) throw new Unfixable('The resource block has no body.');
  const repetition = await repetitionOf(config, block.file, block.dir, body);
  const siblings = related.filter(
    (o) =>
      blockAddress(o.address) === blockAddress(op.address) && o.drift_actions.every((a) => a !== 'delete'),
  );
  const edits: TextEdit[] = [];
  const tops = Object.keys(op.attributes);
  for (const top of tops) {
    const { declared, actual } = op.attributes[top] as { declared: unknown; actual: unknown };
    if (holdsSensitive(declared) || holdsSensitive(actual))
      throw new Unfixable(`Attribute ${top} is sensitive; its value is never copied into code.`);
    if (top === 'tags_all') {
      // tags_all is the provider's default_tags merged with tags: fixed through tags.
      if (tops.includes('tags')) continue;
      throw new Unfixable(
        'Only tags_all drifted: the value comes from the provider default_tags; rewriting it needs a person.',
      );
    }
    // Whether every instance of the block drifted alike is asked per attribute: all workers
    // resized the same way is fixable even when one of them also had a tag changed.
    const mine = changesOf(op, top);
    const alike = siblings.filter((o) => deepEqual(changesOf(o, top), mine)).length;
    const editor = new ConfigEditor(config, {
      repetition,
      allInstancesAlike:
        repetition !== undefined && Number.isFinite(repetition.instances) && alike === repetition.instances,
      driftedInstances: alike,
      key: instanceKey(op.address),
      address: op.address,
    });
    await editor.bodyEntry(block.file, block.dir, body, top, declared, actual, top);
    edits.push(...editor.edits);
  }
  return edits;
}

/** Applies edits to file texts (each file's edits from the end, so offsets stay right). */
export function applyEdits(files: Map<string, string>, edits: TextEdit[]): void {
  const byFile = new Map<string, TextEdit[]>();
  edits.forEach((e) => byFile.set(e.file, [...(byFile.get(e.file) ?? []), e]));
  for (const [file, list] of byFile) {
    let text = files.get(file) ?? '';
    const seen = new Set<string>();
    const ordered = list
      .map((e, i) => ({ e, i }))
      .filter(({ e }) => {
        const k = `${e.start}:${e.end}:${e.text}`;
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
      })
      .sort((x, y) => y.e.start - x.e.start || y.i - x.i);
    for (const { e } of ordered) text = `${text.slice(0, e.start)}${e.text}${text.slice(e.end)}`;
    files.set(file, text);
  }
}
