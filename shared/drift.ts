// Drift as the engine reports it: `show -json` of a saved plan. Pure functions, sandbox-safe.
//
// A resource drifted when `resource_drift` lists it (real state differs from the last recorded
// state). That drift is still live when applying the code would change the resource
// (`resource_changes` action other than no-op): the code and reality disagree. Once the code has
// been reconciled, the planned action is no-op and the drift no longer counts, even though the
// recorded state stays stale until the next apply.
import { z } from 'zod';

const changeSchema = z.object({
  actions: z.array(z.string()),
  before: z.unknown().optional(),
  after: z.unknown().optional(),
  after_unknown: z.unknown().optional(),
  after_sensitive: z.unknown().optional(),
  before_sensitive: z.unknown().optional(),
});

const resourceChangeSchema = z.object({
  address: z.string(),
  module_address: z.string().optional(),
  mode: z.string().optional(),
  type: z.string(),
  name: z.string(),
  provider_name: z.string().optional(),
  change: changeSchema,
});

/** The parts of the plan JSON representation Kumoss reads; everything else passes through. */
export const planJsonSchema = z.looseObject({
  format_version: z.string(),
  terraform_version: z.string().optional(),
  resource_drift: z.array(resourceChangeSchema).optional(),
  resource_changes: z.array(resourceChangeSchema).optional(),
});

export type PlanJson = z.infer<typeof planJsonSchema>;
export type ResourceChange = z.infer<typeof resourceChangeSchema>;

export function parsePlanJson(raw: unknown): PlanJson {
  return planJsonSchema.parse(raw);
}

/** Placeholder for a sensitive value: Kumoss never copies one out of a plan. */
export const SENSITIVE = '(sensitive)';

/**
 * The engine's sensitivity marks (`after_sensitive`, `before_sensitive`): `true` where a value is
 * sensitive, else an object or list of the value's shape holding marks for its parts.
 */
export type SensitiveMarks = unknown;

/** Both sets of marks: a part is sensitive when either says so. */
export function unionMarks(a: SensitiveMarks, b: SensitiveMarks): SensitiveMarks {
  if (a === true || b === true) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return Array.from({ length: Math.max(a.length, b.length) }, (_, i) => unionMarks(a[i], b[i]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const out: Record<string, unknown> = {};
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) out[k] = unionMarks(a[k], b[k]);
    return out;
  }
  return isPlainObject(a) || Array.isArray(a) ? a : b;
}

/** The marks of the part at a dotted `path` (`true` when the part or one holding it is sensitive). */
export function marksAt(marks: SensitiveMarks, path: string): SensitiveMarks {
  let m = marks;
  for (const segment of path ? path.split('.') : []) {
    if (m === true) return true;
    if (isPlainObject(m)) m = m[segment];
    else if (Array.isArray(m) && /^\d+$/.test(segment)) m = m[Number(segment)];
    else return undefined;
  }
  return m;
}

/** `value` with every part its marks call sensitive replaced by {@link SENSITIVE}, at any depth. */
export function redact(value: unknown, marks: SensitiveMarks): unknown {
  if (marks === true) return value === null || value === undefined ? value : SENSITIVE;
  if (Array.isArray(value) && Array.isArray(marks)) return value.map((v, i) => redact(v, marks[i]));
  if (isPlainObject(value) && isPlainObject(marks)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redact(v, marks[k]);
    return out;
  }
  return value;
}

/** Whether a redacted value holds {@link SENSITIVE} anywhere: such a value never goes into code. */
export function holdsSensitive(value: unknown): boolean {
  if (value === SENSITIVE) return true;
  if (Array.isArray(value)) return value.some(holdsSensitive);
  if (isPlainObject(value)) return Object.values(value).some(holdsSensitive);
  return false;
}

const isNoop = (actions: string[]): boolean =>
  actions.length === 0 || actions.every((a) => a === 'no-op' || a === 'read');

/** One changed attribute: `path` is dotted (`data.ingress` reaches into a JSON-string attribute). */
export interface AttributeChange {
  path: string;
  /** What the code declares (the planned value). */
  declared: unknown;
  /** What the real resource holds now (the refreshed value). */
  actual: unknown;
  /**
   * Set on a change found only in a provider's mirror of an attribute (`tags_all` of `tags`): the
   * attribute the code declares, and where the mirrored value comes from.
   */
  mirror_of?: string;
  note?: string;
}

/**
 * Attributes a provider computes as a copy of another (merged with provider-level defaults):
 * AWS `tags_all` of `tags` (with `default_tags`), Google `terraform_labels` and `effective_labels`
 * of `labels` (with `default_labels`), `effective_annotations` of `annotations`. A drift is derived
 * once, on the attribute the code declares.
 */
export const MIRRORED_ATTRIBUTES: Readonly<Record<string, string>> = {
  tags_all: 'tags',
  terraform_labels: 'labels',
  effective_labels: 'labels',
  effective_annotations: 'annotations',
};

const MIRROR_SOURCES: Readonly<Record<string, string>> = {
  tags_all: "the provider's default_tags",
  terraform_labels: "the provider's default_labels",
  effective_labels: "the provider's default_labels or labels Google Cloud adds",
  effective_annotations: 'annotations Google Cloud adds',
};

/** A change path and the same path on its mirror or source attribute (`tags.Team` ⇄ `tags_all.Team`). */
export function equivalentPaths(path: string): string[] {
  const [top = '', ...rest] = path.split('.');
  const tail = rest.length ? `.${rest.join('.')}` : '';
  const source = MIRRORED_ATTRIBUTES[top];
  if (source) return [path, `${source}${tail}`];
  const mirrors = Object.keys(MIRRORED_ATTRIBUTES).filter((m) => MIRRORED_ATTRIBUTES[m] === top);
  return [path, ...mirrors.map((m) => `${m}${tail}`)];
}

const related = (a: string, b: string): boolean => a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);

/**
 * Folds mirror changes into their source: a `tags_all.K` change goes when `tags` (or `tags.K`)
 * changed too; one found only in the mirror stays, saying where its value comes from.
 */
export function foldMirrors(changes: AttributeChange[]): AttributeChange[] {
  const out: AttributeChange[] = [];
  for (const c of changes) {
    const [top = '', ...rest] = c.path.split('.');
    const source = MIRRORED_ATTRIBUTES[top];
    if (!source) {
      out.push(c);
      continue;
    }
    const sourcePath = [source, ...rest].join('.');
    if (changes.some((o) => related(o.path, sourcePath) && !MIRRORED_ATTRIBUTES[o.path.split('.')[0] ?? '']))
      continue;
    out.push({
      ...c,
      mirror_of: source,
      note: `Only ${c.path} differs, not ${sourcePath}: the value comes from ${MIRROR_SOURCES[top] ?? 'the provider'}.`,
    });
  }
  return out;
}

/** A drifted resource with what differs between the code and reality. */
export interface DriftOperation {
  address: string;
  type: string;
  name: string;
  module_address?: string;
  /** How reality moved away from the recorded state: `update` or `delete`. */
  drift_actions: string[];
  /** What applying the code would do about it. */
  planned_actions: string[];
  changes: AttributeChange[];
  /** Whole values of the top-level attributes the changes touch: declared (code) and actual. */
  attributes: Record<string, { declared: unknown; actual: unknown }>;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses a string holding a JSON object or array (attributes such as `data = jsonencode(…)`). */
export function parseJsonString(v: unknown): unknown {
  if (typeof v !== 'string') return undefined;
  const t = v.trim();
  if (!(t.startsWith('{') || t.startsWith('['))) return undefined;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return undefined;
  }
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return (
      ka.length === kb.length &&
      ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]))
    );
  }
  return false;
}

/** null, "", [] and {}: how providers read back an attribute the code leaves unset. */
function unsetValue(v: unknown): boolean {
  return (
    v === null ||
    v === undefined ||
    v === '' ||
    (Array.isArray(v) && v.length === 0) ||
    (isPlainObject(v) && Object.keys(v).length === 0)
  );
}

/**
 * Paths where `declared` and `actual` differ (an unset value and an empty one are the same). Objects are compared key by key; lists and scalars
 * as a whole; a string that holds JSON on both sides is compared as that JSON.
 */
export function diffValues(
  declared: unknown,
  actual: unknown,
  path: string,
  out: AttributeChange[] = [],
): AttributeChange[] {
  if (deepEqual(declared, actual) || (unsetValue(declared) && unsetValue(actual))) return out;
  const dj = parseJsonString(declared);
  const aj = parseJsonString(actual);
  if (dj !== undefined && aj !== undefined && isPlainObject(dj) && isPlainObject(aj)) {
    return diffValues(dj, aj, path, out);
  }
  if (isPlainObject(declared) && isPlainObject(actual)) {
    const keys = new Set([...Object.keys(declared), ...Object.keys(actual)]);
    for (const k of keys) diffValues(declared[k], actual[k], path ? `${path}.${k}` : k, out);
    return out;
  }
  out.push({ path, declared, actual });
  return out;
}

/** Drifted resources whose code still disagrees with reality, with their changed attributes. */
export function deriveDrift(plan: PlanJson): DriftOperation[] {
  const planned = new Map<string, ResourceChange>();
  for (const rc of plan.resource_changes ?? []) planned.set(rc.address, rc);
  const ops: DriftOperation[] = [];
  for (const d of plan.resource_drift ?? []) {
    if (d.mode === 'data' || isNoop(d.change.actions)) continue;
    const p = planned.get(d.address);
    const plannedActions = p?.change.actions ?? ['no-op'];
    if (isNoop(plannedActions)) continue; // the code already matches reality
    const gone = d.change.actions.includes('delete');
    // Values the engine will only know after apply (computed) are not drift; sensitive values
    // never leave the plan: a part any of the plan's marks calls sensitive — the code's, the
    // provider's, before or after, at any depth — is redacted on both sides. Differences are
    // found on the values themselves, so a sensitive value that drifted is still drift.
    const unknown = isPlainObject(p?.change.after_unknown) ? p.change.after_unknown : {};
    const marks = [
      p?.change.after_sensitive,
      p?.change.before_sensitive,
      d.change.after_sensitive,
      d.change.before_sensitive,
    ].reduce<SensitiveMarks>((a, b) => unionMarks(a, b), undefined);
    const changes: AttributeChange[] = gone
      ? [{ path: '', declared: null, actual: null }]
      : foldMirrors(
          diffValues(p?.change.after, d.change.after, '')
            .filter((c) => unknown[c.path.split('.')[0] ?? ''] !== true)
            .map((c) => {
              const at = marksAt(marks, c.path);
              return { ...c, declared: redact(c.declared, at), actual: redact(c.actual, at) };
            }),
        );
    const attributes: DriftOperation['attributes'] = {};
    const declaredAll = isPlainObject(p?.change.after) ? p.change.after : {};
    const actualAll = isPlainObject(d.change.after) ? d.change.after : {};
    for (const c of changes) {
      const top = c.path.split('.')[0] ?? '';
      if (!top || top in attributes) continue;
      const at = marksAt(marks, top);
      attributes[top] = { declared: redact(declaredAll[top], at), actual: redact(actualAll[top], at) };
    }
    ops.push({
      address: d.address,
      type: d.type,
      name: d.name,
      ...(d.module_address ? { module_address: d.module_address } : {}),
      drift_actions: d.change.actions,
      planned_actions: plannedActions,
      changes,
      attributes,
    });
  }
  return ops.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/** Addresses of the live drift, sorted. */
export function driftedAddresses(plan: PlanJson): string[] {
  return deriveDrift(plan).map((o) => o.address);
}

/** True when applying the plan would change nothing managed (code and reality agree). */
export function planInSync(plan: PlanJson): boolean {
  return (plan.resource_changes ?? []).every((rc) => rc.mode === 'data' || isNoop(rc.change.actions));
}

/** Batches of at most `size` operations (orchestration.drift_group_operations). */
export function groupOperations<T>(ops: T[], size: number): T[][] {
  if (!Number.isInteger(size) || size < 1)
    throw new Error(`group size must be a positive integer, got ${size}`);
  const groups: T[][] = [];
  for (let i = 0; i < ops.length; i += size) groups.push(ops.slice(i, i + size));
  return groups;
}

/**
 * Groups drift operations in batches of about `size`, never splitting the instances of one
 * resource block (count / for_each) across groups: whether they all drifted alike decides how
 * the block is fixed.
 */
export function groupDriftOperations(ops: DriftOperation[], size: number): DriftOperation[][] {
  if (!Number.isInteger(size) || size < 1)
    throw new Error(`group size must be a positive integer, got ${size}`);
  const units = new Map<string, DriftOperation[]>();
  for (const o of ops) {
    const k = o.address.replace(/\[[^\]]*\]$/, '');
    units.set(k, [...(units.get(k) ?? []), o]);
  }
  const groups: DriftOperation[][] = [];
  let current: DriftOperation[] = [];
  for (const unit of units.values()) {
    if (current.length > 0 && current.length + unit.length > size) {
      groups.push(current);
      current = [];
    }
    current.push(...unit);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}
