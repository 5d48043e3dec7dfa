// Offline generation: a small, stated set of requests carried out deterministically on resources
// that exist in the root, and nothing else — anything outside the set is declined with "needs a
// language model" and examples of what it does carry out, built from the root's own resources;
// never guessed. The set (the words people type around it — "the", "a", "please" — are fine):
//
//   set <attribute> of <resource> to <value>          (a top-level attribute: number, true/false, text)
//   resize <resource> to <instance type>               (instance_type)
//   add tag <key>=<value> to <resource>                (also "add the tag K = V to …",
//                                                        "tag <resource> with K=V", "set the tag K to V on …")
//   remove tag <key> from <resource>
//   add ingress rule <tcp|udp> <port>[-<port>] from <cidr> to <resource>
//                                                      (also "open port N from <cidr> on <resource>")
//   remove ingress rule <tcp|udp> <port>[-<port>] from <resource>   (also "close port N on <resource>")
//   set count of <resource> to <n>                      (a literal count; also "scale <resource> to <n>")
//
// <resource> is an address (`aws_security_group.web`), a name a person uses for it (its Name tag, its
// cloud name or id), or a few words of its name with its kind ("the bastion security group") when
// they name exactly one resource. The change is made the way a drift is reconciled: the code is edited
// until it declares the wanted value (activities/hcl-edit.ts), so a value that comes from a variable
// or a local is changed there, and what cannot be edited safely is declined with the editor's reason.
import type { DriftOperation } from '../../shared/drift';
import { applyEdits, reconcileOperation, Unfixable } from '../hcl-edit';
import { hclString } from '../hcl';
import { attributeExpr, bodyOf, evalLiteral, moduleDirOfFile, TerraformConfig } from '../terraform-config';
import type { ConfigResource, Generation, SourceFile, StateResource } from './port';

export const NEEDS_MODEL =
  'This request needs a language model: the offline model carries out only setting an attribute, adding or removing a tag, adding or removing an ingress rule, and changing a count, on resources that exist in the root.';

type Intent =
  | { kind: 'set'; attribute: string; value: unknown; target: string }
  | { kind: 'add-tag'; key: string; value: string; target: string }
  | { kind: 'remove-tag'; key: string; target: string }
  | { kind: 'add-ingress'; protocol: string; from: number; to: number; cidr: string; target: string }
  | { kind: 'remove-ingress'; protocol: string; from: number; to: number; target: string }
  | { kind: 'count'; count: number; target: string };

const TARGET = String.raw`(?<target>"[^"]+"|'[^']+'|[^"'].*?)`;
const unquote = (s: string): string => s.replace(/^["']|["']$/g, '');
const KEY = String.raw`(?<key>[A-Za-z0-9_.:/-]+)`;
const VALUE = String.raw`(?<value>"[^"]*"|'[^']*'|\S+)`;
const RULE = String.raw`(?:an? |the )?ingress rule (?:for |allowing )?(?<proto>tcp|udp) (?:port )?(?<from>\d+)(?:-(?<to>\d+))?`;
const PORT = String.raw`(?:(?<proto>tcp|udp) )?port (?<from>\d+)(?:-(?<to>\d+))?`;
const CIDR = String.raw`(?<cidr>\d{1,3}(?:\.\d{1,3}){3}/\d{1,2})`;

function scalar(text: string): unknown {
  const t = text.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (t === 'true' || t === 'false') return t === 'true';
  return unquote(t);
}

/** The request as one of the offline set, or undefined. */
export function parseGenerateRequest(text: string): Intent | undefined {
  const t = text
    .trim()
    .replace(/[.!]+$/, '')
    .replace(/^(?:please|kindly)[, ]+/i, '')
    .replace(/\s+please$/i, '');
  const match = (pattern: string) => new RegExp(`^${pattern}$`, 'i').exec(t);
  let m: RegExpExecArray | null;
  const field = (x: RegExpExecArray, k: string): string => x.groups?.[k] ?? '';
  const target = (x: RegExpExecArray) => unquote(field(x, 'target').trim());
  const ports = (x: RegExpExecArray) => ({
    protocol: (field(x, 'proto') || 'tcp').toLowerCase(),
    from: Number(field(x, 'from')),
    to: Number(field(x, 'to') || field(x, 'from')),
  });
  if (
    (m = match(String.raw`(?:set|change) (?:the )?count of ${TARGET} to (?<n>\d+)`)) ||
    (m = match(String.raw`scale ${TARGET} (?:to|out to|in to) (?<n>\d+)(?: instances)?`))
  )
    return { kind: 'count', count: Number(field(m, 'n')), target: target(m) };
  if (
    (m = match(String.raw`add (?:an? |the )?tag ${KEY}\s*=\s*${VALUE} (?:to|on) ${TARGET}`)) ||
    (m = match(String.raw`tag ${TARGET} with ${KEY}\s*=\s*${VALUE}`)) ||
    (m = match(String.raw`set (?:the )?tag ${KEY} (?:to|=) ${VALUE} (?:on|of) ${TARGET}`))
  )
    return { kind: 'add-tag', key: field(m, 'key'), value: unquote(field(m, 'value')), target: target(m) };
  if ((m = match(String.raw`remove (?:the )?tag ${KEY} from ${TARGET}`)))
    return { kind: 'remove-tag', key: field(m, 'key'), target: target(m) };
  if (
    (m = match(String.raw`add ${RULE} from ${CIDR} (?:to|on) ${TARGET}`)) ||
    (m = match(String.raw`open ${PORT} (?:from|to) ${CIDR} (?:on|in) ${TARGET}`))
  )
    return { kind: 'add-ingress', ...ports(m), cidr: field(m, 'cidr'), target: target(m) };
  if (
    (m = match(String.raw`remove ${RULE} (?:from|on) ${TARGET}`)) ||
    (m = match(String.raw`close ${PORT} (?:on|in) ${TARGET}`))
  )
    return { kind: 'remove-ingress', ...ports(m), target: target(m) };
  if ((m = match(String.raw`resize ${TARGET} to (?<value>[a-z0-9]+\.[a-z0-9]+)`)))
    return { kind: 'set', attribute: 'instance_type', value: field(m, 'value'), target: target(m) };
  if (
    (m = match(
      String.raw`(?:set|change) (?:the )?(?<attr>[a-z_][a-z0-9_]*) (?:of|on) ${TARGET} to (?<value>.+)`,
    ))
  ) {
    if (field(m, 'attr') === 'count') return undefined;
    return { kind: 'set', attribute: field(m, 'attr'), value: scalar(field(m, 'value')), target: target(m) };
  }
  return undefined;
}

const FILLER = new Set(['the', 'a', 'an', 'our', 'my', 'resource']);
const words = (s: string): string[] =>
  s
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w && !FILLER.has(w))
    // "the worker instances": plurals name the kind too (a name word still matches its singular).
    .map((w) => (w.length > 3 && w.endsWith('s') && !w.endsWith('ss') ? w.slice(0, -1) : w));

/**
 * Resources named by a few words: the kind ("security group", "bucket", "instance" — the end of the
 * resource type) and words of its name, Name tag or cloud name.
 */
function byWords(target: string, resources: ConfigResource[], state: StateResource[]): ConfigResource[] {
  const said = words(target);
  if (said.length === 0) return [];
  const nameOf = (r: ConfigResource): string => {
    const inState = state.filter((s) => s.address === r.address || s.address.startsWith(`${r.address}[`));
    const extra = inState.flatMap((s) => [
      s.values.name,
      (s.values.tags as Record<string, unknown> | null | undefined)?.Name,
      s.values.bucket,
    ]);
    return [r.name, r.address, ...(r.identifiers ?? []), ...extra]
      .filter((x): x is string => typeof x === 'string')
      .join(' ')
      .toLowerCase();
  };
  return resources.filter((r) => {
    if (r.type === 'module') return false;
    const kind = r.type.split('_').slice(1);
    // The longest end of the type's words the request says, in order ("security group", "group").
    let rest = said;
    for (let n = kind.length; n >= 1; n--) {
      const phrase = kind.slice(kind.length - n).join(' ');
      const at = ` ${said.join(' ')} `.indexOf(` ${phrase} `);
      if (at >= 0) {
        const before = said.join(' ').slice(0, Math.max(0, at - 1));
        const after = said.join(' ').slice(at + phrase.length);
        rest = `${before} ${after}`.split(' ').filter(Boolean);
        break;
      }
    }
    if (rest.length === said.length || rest.length === 0) return false;
    const name = nameOf(r);
    return rest.every((w) => name.includes(w));
  });
}

/** What the offline model carries out, with examples built from the root's own resources. */
export function offlinePhrasings(resources: ConfigResource[], state: StateResource[]): string {
  const real = resources.filter((r) => r.type !== 'module');
  const tagged =
    real.find((r) => state.some((s) => s.address.startsWith(r.address) && 'tags' in s.values)) ?? real[0];
  const someone = (r: ConfigResource | undefined): string => {
    if (!r) return 'aws_security_group.web';
    const s = state.find((x) => x.address === r.address);
    const name = (s?.values.tags as Record<string, unknown> | null | undefined)?.Name;
    return typeof name === 'string' ? name : r.address;
  };
  const group = real.find((r) =>
    state.some((s) => s.address === r.address && Array.isArray(s.values.ingress)),
  );
  const sized = real.find((r) =>
    state.some((s) => s.address.startsWith(r.address) && 'instance_type' in s.values),
  );
  const counted = real.find((r) => state.some((s) => s.address.startsWith(`${r.address}[0]`)));
  const examples = [
    `add the tag Team = platform to ${someone(tagged)}`,
    `remove the tag Team from ${tagged?.address ?? 'aws_security_group.web'}`,
    ...(group
      ? [
          `open port 8080 from 10.0.0.0/16 on ${group.address}`,
          `remove the ingress rule tcp 8080 from ${group.address}`,
        ]
      : []),
    ...(sized
      ? [`resize ${sized.address} to t3.small`]
      : [`set description of ${tagged?.address ?? 'x'} to "…"`]),
    ...(counted ? [`set the count of ${counted.address} to 3`] : []),
  ];
  return `It carries out requests such as ${examples.map((e) => `"${e}"`).join('; ')} — naming a resource by its address, its Name tag, its cloud name or a few words of its name and kind.`;
}

/** The one resource the request names: by address, else by a name people use for it. */
function resolveTarget(
  target: string,
  resources: ConfigResource[],
  state: StateResource[],
): { resource: ConfigResource; instances: StateResource[] } | { declined: string } {
  // A name people use (a Name tag, a cloud id or name) found in the state names one instance.
  const idsOf = (v: Record<string, unknown>): unknown[] => [
    v.id,
    v.arn,
    (v.tags as Record<string, unknown> | null | undefined)?.Name,
    v.name,
    v.bucket,
  ];
  const known = state.filter((s) => idsOf(s.values).includes(target));
  const resolved =
    known.length === 1 && !resources.some((r) => r.address === target) ? known[0]?.address : undefined;
  const wanted = resolved ?? target;
  // One instance of a count/for_each block: its block, and that instance's state.
  const indexed = /\[[^\]]*\]$/.test(wanted);
  const instanceOf = indexed ? wanted : undefined;
  const base = wanted.replace(/\[[^\]]*\]$/, '');
  const byAddress = resources.find((r) => r.address === base);
  const direct = byAddress
    ? [byAddress]
    : resources.filter((r) => (r.identifiers ?? []).includes(target) || r.address.endsWith(`.${target}`));
  const named = direct.length > 0 ? direct : byWords(target, resources, state);
  if (named.length === 0)
    return { declined: `No resource ${target} exists in the root. ${offlinePhrasings(resources, state)}` };
  if (named.length > 1)
    return {
      declined: `${target} names ${named.length} resources (${named.map((r) => r.address).join(', ')}); name one by its address.`,
    };
  const resource = named[0] as ConfigResource;
  const address = instanceOf ?? resource.address;
  // A count/for_each block named by its address: every instance changes alike.
  const instances = state.filter(
    (s) => s.address === address || (!instanceOf && s.address.startsWith(`${address}[`)),
  );
  return { resource, instances };
}

/** An ingress rule as the provider's state holds it (the fields the schema has, defaults for the rest). */
function ingressRule(
  like: Record<string, unknown> | undefined,
  r: { protocol: string; from: number; to: number; cidr: string },
) {
  const rule: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(like ?? {}))
    rule[k] = Array.isArray(v) ? [] : typeof v === 'boolean' ? false : typeof v === 'string' ? '' : v;
  return { ...rule, from_port: r.from, to_port: r.to, protocol: r.protocol, cidr_blocks: [r.cidr] };
}

/** Carries out a request of the offline set; declines anything else (with the reason). */
export async function offlineGenerate(input: {
  text: string;
  files: SourceFile[];
  resources: ConfigResource[];
  state: StateResource[];
}): Promise<Generation> {
  const intent = parseGenerateRequest(input.text);
  if (!intent)
    return {
      edits: [],
      declined: `${NEEDS_MODEL} ${offlinePhrasings(input.resources, input.state)}`,
      summary: '',
    };
  const found = resolveTarget(intent.target, input.resources, input.state);
  if ('declined' in found) return { edits: [], declined: found.declined, summary: '' };
  const config = TerraformConfig.of(input.files);
  try {
    return await generateIn(config, intent, found);
  } finally {
    config.dispose();
  }
}

/** The offline generation of `intent` on `found`, editing `config` (its caller disposes of it). */
async function generateIn(
  config: TerraformConfig,
  intent: NonNullable<ReturnType<typeof parseGenerateRequest>>,
  found: Exclude<ReturnType<typeof resolveTarget>, { declined: string }>,
): Promise<Generation> {
  const { resource, instances } = found;
  const instance = instances[0];
  const original = new Map(config.files);

  if (intent.kind === 'count') {
    const block = (await config.blocks(moduleDirOfFile(resource.file), 'resource')).find(
      (b) => b.file === resource.file && b.labels[0] === resource.type && b.labels[1] === resource.name,
    );
    const expr = block ? attributeExpr(bodyOf(block.node), 'count') : undefined;
    if (!expr || !evalLiteral(expr).ok)
      return {
        edits: [],
        declined: `${resource.address} has no literal count to change; ${NEEDS_MODEL}`,
        summary: '',
      };
    applyEdits(config.files, [
      { file: resource.file, start: expr.startIndex, end: expr.endIndex, text: String(intent.count) },
    ]);
    return changed(config, original, `Set the count of ${resource.address} to ${intent.count}.`);
  }

  if (!instance)
    return {
      edits: [],
      declined: `${resource.address} is not in the state yet; ${NEEDS_MODEL}`,
      summary: '',
    };
  const values = instance.values;
  let attribute: string;
  let wanted: unknown;
  let summary: string;
  switch (intent.kind) {
    case 'set':
      if (!(intent.attribute in values))
        return {
          edits: [],
          declined: `${resource.address} has no attribute ${intent.attribute}.`,
          summary: '',
        };
      attribute = intent.attribute;
      wanted = typeof values[attribute] === 'string' ? String(intent.value) : intent.value;
      summary = `Set ${attribute} of ${resource.address} to ${hclString(String(intent.value))}.`;
      break;
    case 'add-tag':
    case 'remove-tag': {
      if (!('tags' in values))
        return { edits: [], declined: `${resource.address} takes no tags.`, summary: '' };
      const tags = { ...((values.tags as Record<string, string> | null) ?? {}) };
      if (intent.kind === 'add-tag') tags[intent.key] = intent.value;
      else if (!(intent.key in tags))
        return { edits: [], declined: `${resource.address} has no tag ${intent.key}.`, summary: '' };
      else delete tags[intent.key];
      attribute = 'tags';
      wanted = tags;
      summary =
        intent.kind === 'add-tag'
          ? `Added the tag ${intent.key}=${intent.value} to ${resource.address}.`
          : `Removed the tag ${intent.key} from ${resource.address}.`;
      break;
    }
    case 'add-ingress':
    case 'remove-ingress': {
      if (!Array.isArray(values.ingress))
        return { edits: [], declined: `${resource.address} has no ingress rules to change.`, summary: '' };
      const rules = values.ingress as Record<string, unknown>[];
      const same = (r: Record<string, unknown>) =>
        r.protocol === intent.protocol && r.from_port === intent.from && r.to_port === intent.to;
      if (intent.kind === 'add-ingress') {
        wanted = [...rules, ingressRule(rules[0], intent)];
        summary = `Added an ingress rule ${intent.protocol} ${intent.from}${intent.to !== intent.from ? `-${intent.to}` : ''} from ${intent.cidr} to ${resource.address}.`;
      } else {
        if (!rules.some(same))
          return {
            edits: [],
            declined: `${resource.address} has no ${intent.protocol} ${intent.from} ingress rule.`,
            summary: '',
          };
        wanted = rules.filter((r) => !same(r));
        summary = `Removed the ingress rule ${intent.protocol} ${intent.from}${intent.to !== intent.from ? `-${intent.to}` : ''} from ${resource.address}.`;
      }
      attribute = 'ingress';
      break;
    }
  }
  // The change as a drift the code must follow: the state's value declared, the wanted one real —
  // for every instance the request names (all of a count/for_each block, or one of them).
  const ops: DriftOperation[] = instances.map((i) => ({
    address: i.address,
    type: resource.type,
    name: resource.name,
    drift_actions: ['update'],
    planned_actions: ['update'],
    changes: [{ path: attribute, declared: values[attribute], actual: wanted }],
    attributes: { [attribute]: { declared: values[attribute], actual: wanted } },
  }));
  if (instances.some((i) => JSON.stringify(i.values[attribute]) !== JSON.stringify(values[attribute])))
    return {
      edits: [],
      declined: `The instances of ${resource.address} differ in ${attribute} today; ${NEEDS_MODEL}`,
      summary: '',
    };
  try {
    for (const op of ops) applyEdits(config.files, await reconcileOperation(config, op, ops));
  } catch (err) {
    if (err instanceof Unfixable)
      return { edits: [], declined: `${err.message} ${NEEDS_MODEL}`, summary: '' };
    throw err;
  }
  return changed(config, original, summary);
}

function changed(config: TerraformConfig, original: Map<string, string>, summary: string): Generation {
  const edits = [...config.files]
    .filter(([path, content]) => original.get(path) !== content)
    .map(([path, content]) => ({ path, content }));
  return edits.length > 0
    ? { edits, summary }
    : { edits: [], declined: 'The code already declares this; there is nothing to change.', summary: '' };
}
