// Drift-exception rules (`<cloud>-guidelines-drift_exceptions`): drift left alone on purpose.
// Each rule matches by resource type, address and attribute path (glob patterns, `*` matches any
// run of characters) and carries the reason reported with the drift it covers. Deterministic and
// explainable: every excluded change names the rule that excluded it. Sandbox-safe.
import { z } from 'zod';
import { equivalentPaths, isPlainObject, type AttributeChange, type DriftOperation } from './drift';
import type { Cloud } from './workflow-inputs';

export { activeRules, CLOUDS, type Cloud } from './workflow-inputs';

export const exceptionRuleSchema = z
  .object({
    id: z.string().min(1),
    resource_type: z.string().min(1).default('*'),
    address: z.string().min(1).default('*'),
    /** Attribute path pattern; `*` (the default) covers the whole resource, deletion included. */
    attribute: z.string().min(1).default('*'),
    reason: z.string().min(1),
    /** ISO date (YYYY-MM-DD); the rule stops applying after that day. */
    expires: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}$/, 'expires must be a date, YYYY-MM-DD')
      .optional(),
  })
  .strict();

export type ExceptionRule = z.infer<typeof exceptionRuleSchema>;

export const exceptionCatalogueSchema = z
  .object({
    /** Prose for the model: what this cloud's exceptions are about. */
    guidance: z.string().default(''),
    rules: z.array(exceptionRuleSchema).default([]),
  })
  .strict();

export type ExceptionCatalogue = z.infer<typeof exceptionCatalogueSchema>;

export function exceptionPromptName(cloud: Cloud): string {
  return `${cloud}-guidelines-drift_exceptions`;
}

const globCache = new Map<string, RegExp>();
export function globMatch(pattern: string, value: string): boolean {
  let re = globCache.get(pattern);
  if (!re) {
    const body = pattern
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*');
    re = new RegExp(`^${body}$`);
    globCache.set(pattern, re);
  }
  return re.test(value);
}

/** Rules still in force on `today` (YYYY-MM-DD; the workflow passes its own clock). */

function ruleCovers(rule: ExceptionRule, op: DriftOperation, change: AttributeChange): boolean {
  if (!globMatch(rule.resource_type, op.type) || !globMatch(rule.address, op.address)) return false;
  if (rule.attribute === '*') return true;
  // A deleted resource has one change with an empty path: only a whole-resource rule covers it.
  if (change.path === '') return false;
  // A rule on `tags.Patch` covers the provider's mirror `tags_all.Patch`, and the other way round.
  return equivalentPaths(change.path).some(
    (path) => globMatch(rule.attribute, path) || path.startsWith(`${rule.attribute.replace(/\*$/, '')}.`),
  );
}

/** `value` with the entry at `keys` set as in `from` (removed where `from` has none). */
function withEntryOf(value: unknown, from: unknown, keys: string[]): unknown {
  const [k, ...rest] = keys;
  if (k === undefined) return from;
  if (!isPlainObject(value)) return value;
  const next = isPlainObject(from) ? from[k] : undefined;
  const out = { ...value };
  if (rest.length === 0 && next === undefined) delete out[k];
  else out[k] = withEntryOf(value[k], next, rest);
  return out;
}

/**
 * The whole attribute values a survivor is remediated from, with what the rules leave alone taken
 * out: a tag a rule covers keeps its declared value, so writing the rest of the map into the code
 * never writes that tag.
 */
function survivorAttributes(op: DriftOperation, kept: AttributeChange[], excluded: AttributeChange[]) {
  const attributes: DriftOperation['attributes'] = {};
  for (const [top, v] of Object.entries(op.attributes)) {
    if (!kept.some((c) => c.path.split('.')[0] === top)) continue;
    let actual = v.actual;
    for (const c of excluded) {
      const [t, ...keys] = c.path.split('.');
      if (t === top && keys.length > 0) actual = withEntryOf(actual, v.declared, keys);
    }
    attributes[top] = { declared: v.declared, actual };
  }
  return attributes;
}

export interface WhitelistedException {
  address: string;
  attributes: string[];
  rule_id: string;
  reason: string;
}

export interface ExceptionResult {
  /** Operations with the changes no rule covers; operations fully covered are gone. */
  survivors: DriftOperation[];
  whitelisted: WhitelistedException[];
}

/** Splits the drift into what must be remediated and what the rules leave alone. */
export function applyExceptions(ops: DriftOperation[], rules: ExceptionRule[]): ExceptionResult {
  const survivors: DriftOperation[] = [];
  const whitelisted: WhitelistedException[] = [];
  for (const op of ops) {
    const kept: AttributeChange[] = [];
    const excluded: AttributeChange[] = [];
    const byRule = new Map<ExceptionRule, string[]>();
    for (const change of op.changes) {
      const rule = rules.find((r) => ruleCovers(r, op, change));
      if (rule) {
        byRule.set(rule, [...(byRule.get(rule) ?? []), change.path || '*']);
        excluded.push(change);
      } else kept.push(change);
    }
    for (const [rule, attributes] of byRule) {
      whitelisted.push({ address: op.address, attributes, rule_id: rule.id, reason: rule.reason });
    }
    if (kept.length > 0)
      survivors.push({
        ...op,
        changes: kept,
        attributes: excluded.length ? survivorAttributes(op, kept, excluded) : op.attributes,
      });
  }
  return { survivors, whitelisted };
}
