// Offline generation: a small, stated set of requests carried out deterministically on resources
// that exist in the root, and nothing else — anything outside the set is declined with "needs a
// language model", never guessed. The set:
//
//   set <attribute> of <resource> to <value>          (a top-level attribute: number, true/false, text)
//   add tag <key>=<value> to <resource>                (also "add the tag …", "add a tag …")
//   remove tag <key> from <resource>
//   add ingress rule <tcp|udp> <port>[-<port>] from <cidr> to <resource>
//   remove ingress rule <tcp|udp> <port>[-<port>] from <resource>
//   set count of <resource> to <n>                      (a literal count)
//
// <resource> is an address (`aws_security_group.web`) or a name a person uses for it (its Name tag,
// its cloud name). The change is made the way a drift is reconciled: the code is edited until it
// declares the wanted value (activities/hcl-edit.ts), so a value that comes from a variable or a
// local is changed there, and what cannot be edited safely is declined with the editor's reason.
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

const TARGET = String.raw`(?<target>[^\s"']+|"[^"]+"|'[^']+')`;
const unquote = (s: string): string => s.replace(/^["']|["']$/g, '');

function scalar(text: string): unknown {
  const t = text.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (t === 'true' || t === 'false') return t === 'true';
  return unquote(t);
}

/** The request as one of the offline set, or undefined. */
export function parseGenerateRequest(text: string): Intent | undefined {
  const t = text.trim().replace(/[.!]+$/, '');
  let m: RegExpExecArray | null;
  const field = (x: RegExpExecArray, k: string): string => x.groups?.[k] ?? '';
  if ((m = new RegExp(String.raw`^(?:set|change) (?:the )?count of ${TARGET} to (?<n>\d+)$`, 'i').exec(t)))
    return { kind: 'count', count: Number(field(m, 'n')), target: unquote(field(m, 'target')) };
  if (
    (m = new RegExp(
      String.raw`^add (?:an? |the )?tag (?<key>[A-Za-z0-9_.:/-]+)\s*=\s*(?<value>"[^"]*"|'[^']*'|\S+) (?:to|on) ${TARGET}$`,
      'i',
    ).exec(t))
  )
    return {
      kind: 'add-tag',
      key: field(m, 'key'),
      value: unquote(field(m, 'value')),
      target: unquote(field(m, 'target')),
    };
  if (
    (m = new RegExp(String.raw`^remove (?:the )?tag (?<key>[A-Za-z0-9_.:/-]+) from ${TARGET}$`, 'i').exec(t))
  )
    return { kind: 'remove-tag', key: field(m, 'key'), target: unquote(field(m, 'target')) };
  const rule = String.raw`(?:an? |the )?ingress rule (?:for |allowing )?(?<proto>tcp|udp) (?:port )?(?<from>\d+)(?:-(?<to>\d+))?`;
  if (
    (m = new RegExp(
      String.raw`^add ${rule} from (?<cidr>\d{1,3}(?:\.\d{1,3}){3}/\d{1,2}) (?:to|on) ${TARGET}$`,
      'i',
    ).exec(t))
  ) {
    return {
      kind: 'add-ingress',
      protocol: field(m, 'proto').toLowerCase(),
      from: Number(field(m, 'from')),
      to: Number(field(m, 'to') || field(m, 'from')),
      cidr: field(m, 'cidr'),
      target: unquote(field(m, 'target')),
    };
  }
  if ((m = new RegExp(String.raw`^remove ${rule} (?:from|on) ${TARGET}$`, 'i').exec(t))) {
    return {
      kind: 'remove-ingress',
      protocol: field(m, 'proto').toLowerCase(),
      from: Number(field(m, 'from')),
      to: Number(field(m, 'to') || field(m, 'from')),
      target: unquote(field(m, 'target')),
    };
  }
  if (
    (m = new RegExp(
      String.raw`^(?:set|change) (?:the )?(?<attr>[a-z_][a-z0-9_]*) (?:of|on) ${TARGET} to (?<value>.+)$`,
      'i',
    ).exec(t))
  ) {
    if (field(m, 'attr') === 'count') return undefined;
    return {
      kind: 'set',
      attribute: field(m, 'attr'),
      value: scalar(field(m, 'value')),
      target: unquote(field(m, 'target')),
    };
  }
  return undefined;
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
  const named = byAddress
    ? [byAddress]
    : resources.filter((r) => (r.identifiers ?? []).includes(target) || r.address.endsWith(`.${target}`));
  if (named.length === 0) return { declined: `No resource ${target} exists in the root.` };
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
  if (!intent) return { edits: [], declined: NEEDS_MODEL, summary: '' };
  const found = resolveTarget(intent.target, input.resources, input.state);
  if ('declined' in found) return { edits: [], declined: found.declined, summary: '' };
  const { resource, instances } = found;
  const instance = instances[0];
  const config = TerraformConfig.of(input.files);
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
