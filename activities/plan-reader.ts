// Reads the parts of a `show -json` plan that drift needs, streaming: large plans (tens of MB for
// tens of thousands of resources) are never held in memory whole. Only `resource_drift` entries
// are kept, and the `resource_changes` entries of drifted addresses; `planned_values`,
// `prior_state` and `configuration` are skipped byte by byte. Also the state's `show -json` and
// `state pull`, checked with zod; and the refreshed state a saved plan file carries, read without
// the engine (a plan that changes nothing needs no `show -json`).
import { createReadStream, readFileSync } from 'node:fs';
import { strFromU8, unzipSync } from 'fflate';
import { z } from 'zod';
import { CLOUD_ID_FIELDS, type StateResource } from '../shared/audit-events';
import { parsePlanJson, type PlanJson } from '../shared/drift';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COLON = 0x3a;

type Section = 'resource_drift' | 'resource_changes';

/**
 * Scans plan JSON text chunk by chunk. Top-level scalar fields (format_version, …) and every
 * element of the two arrays are handed over whole; nothing else is materialised.
 */
export class PlanScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Bytes of the current top-level key or scalar value, or the current array element. */
  private capture: Buffer[] = [];
  private captureStart = -1;
  private lastKey = '';
  private keyStart = -1;
  private keyParts: Buffer[] = [];
  private section: Section | undefined;
  private scalarKey: string | undefined;
  private readonly top: Record<string, unknown> = {};

  constructor(private readonly onElement: (section: Section, json: string) => void) {}

  push(chunk: Buffer): void {
    const n = chunk.length;
    for (let i = 0; i < n; i++) {
      const c = chunk[i] as number;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) {
          this.inString = false;
          if (this.keyStart >= 0) {
            this.keyParts.push(chunk.subarray(this.keyStart, i));
            this.lastKey = Buffer.concat(this.keyParts).toString('utf8');
            this.keyParts = [];
            this.keyStart = -1;
          }
        }
        continue;
      }
      if (c === QUOTE) {
        this.inString = true;
        // A string at depth 1 outside a value capture is a top-level key (or a scalar value).
        if (this.depth === 1 && this.captureStart < 0 && this.scalarKey === undefined) this.keyStart = i + 1;
        continue;
      }
      if (c === COLON && this.depth === 1) {
        if (this.lastKey === 'resource_drift' || this.lastKey === 'resource_changes')
          this.section = this.lastKey;
        else if (this.lastKey === 'format_version' || this.lastKey === 'terraform_version') {
          this.scalarKey = this.lastKey;
          this.captureStart = i + 1;
        }
        continue;
      }
      if (this.scalarKey !== undefined && this.depth === 1 && (c === 0x2c || c === RBRACE)) {
        this.capture.push(chunk.subarray(this.captureStart, i));
        this.top[this.scalarKey] = JSON.parse(Buffer.concat(this.capture).toString('utf8')) as unknown;
        this.capture = [];
        this.captureStart = -1;
        this.scalarKey = undefined;
      }
      if (c === LBRACE || c === LBRACKET) {
        this.depth++;
        if (this.depth === 3 && this.section && c === LBRACE) this.captureStart = i;
      } else if (c === RBRACE || c === RBRACKET) {
        if (this.depth === 3 && this.section && c === RBRACE && this.captureStart >= 0) {
          this.capture.push(chunk.subarray(this.captureStart, i + 1));
          this.onElement(this.section, Buffer.concat(this.capture).toString('utf8'));
          this.capture = [];
          this.captureStart = -1;
        }
        this.depth--;
        if (this.depth === 1) this.section = undefined;
      }
    }
    // Carry partial captures (a key, a scalar or an element split across chunks) to the next chunk.
    if (this.keyStart >= 0) {
      this.keyParts.push(chunk.subarray(this.keyStart));
      this.keyStart = 0;
    }
    if (this.captureStart >= 0) {
      this.capture.push(chunk.subarray(this.captureStart));
      this.captureStart = 0;
    }
  }

  get topLevel(): Record<string, unknown> {
    return this.top;
  }
}

/** The drift-relevant part of a plan file, as a (small) plan representation. */
export async function readPlanForDrift(
  path: string,
  /** Handed every managed resource's prior values (`change.before`), e.g. for its cloud ids. */
  onResource?: (r: StateResource) => void,
): Promise<PlanJson> {
  const drift: unknown[] = [];
  const driftAddresses = new Set<string>();
  const changes: unknown[] = [];
  const pendingChanges: { address: string; entry: unknown }[] = [];
  const scanner = new PlanScanner((section, json) => {
    const entry = JSON.parse(json) as {
      address?: string;
      mode?: string;
      type?: string;
      change?: { before?: unknown; before_sensitive?: unknown };
    };
    if (onResource && section === 'resource_changes' && entry.address && entry.mode !== 'data') {
      const before = entry.change?.before;
      if (before && typeof before === 'object' && !Array.isArray(before)) {
        // Values the engine marks sensitive are left out.
        const marks = entry.change?.before_sensitive;
        const sensitive = marks && typeof marks === 'object' ? (marks as Record<string, unknown>) : {};
        const values = Object.fromEntries(
          Object.entries(before as Record<string, unknown>).filter(([k]) => sensitive[k] !== true),
        );
        onResource({ address: entry.address, type: entry.type ?? '', values });
      }
    }
    if (section === 'resource_drift') {
      drift.push(entry);
      if (entry.address) driftAddresses.add(entry.address);
    } else if (entry.address && driftAddresses.has(entry.address)) {
      changes.push(entry);
    } else if (driftAddresses.size === 0 && entry.address) {
      // resource_changes before resource_drift (not the engines' order): keep only real changes.
      const actions = (entry as { change?: { actions?: string[] } }).change?.actions ?? [];
      if (actions.some((a) => a !== 'no-op' && a !== 'read'))
        pendingChanges.push({ address: entry.address, entry });
    }
  });
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 18 })) scanner.push(chunk as Buffer);
  for (const p of pendingChanges) if (driftAddresses.has(p.address)) changes.push(p.entry);
  return parsePlanJson({ ...scanner.topLevel, resource_drift: drift, resource_changes: changes });
}

interface StateModule {
  resources?: { address: string; mode?: string; type: string; values?: Record<string, unknown> }[];
  child_modules?: StateModule[];
}

const stateModuleSchema: z.ZodType<StateModule> = z.lazy(() =>
  z.looseObject({
    resources: z
      .array(
        z.looseObject({
          address: z.string(),
          mode: z.string().optional(),
          type: z.string(),
          values: z.record(z.string(), z.unknown()).optional(),
        }),
      )
      .optional(),
    child_modules: z.array(stateModuleSchema).optional(),
  }),
);

const stateJsonSchema = z.looseObject({
  values: z.looseObject({ root_module: stateModuleSchema.optional() }).optional(),
});

/** The managed resource instances of a state's `show -json` (read at `path`), with their values. */
export function readStateResources(
  path: string,
): { address: string; type: string; values: Record<string, unknown> }[] {
  const state = stateJsonSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
  const out: { address: string; type: string; values: Record<string, unknown> }[] = [];
  const walk = (m: StateModule | undefined): void => {
    for (const r of m?.resources ?? [])
      if (r.mode !== 'data') out.push({ address: r.address, type: r.type, values: r.values ?? {} });
    for (const c of m?.child_modules ?? []) walk(c);
  };
  walk(state.values?.root_module);
  return out;
}

const stateVersionSchema = z.looseObject({
  serial: z.number().int().optional(),
  lineage: z.string().optional(),
});

/** The serial and lineage of a raw state (`state pull`); null without a serial. */
export function stateVersionOf(raw: string): { serial: number; lineage: string } | null {
  const state = stateVersionSchema.parse(JSON.parse(raw));
  return state.serial !== undefined ? { serial: state.serial, lineage: state.lineage ?? '' } : null;
}

/** A state file (format version 4) as the engines write it, in the parts read here. */
const stateFileSchema = z.looseObject({
  version: z.literal(4),
  resources: z
    .array(
      z.looseObject({
        module: z.string().optional(),
        mode: z.string(),
        type: z.string(),
        name: z.string(),
        instances: z.array(
          z.looseObject({
            index_key: z.union([z.number(), z.string()]).optional(),
            deposed: z.string().optional(),
            attributes: z.record(z.string(), z.unknown()).optional(),
            sensitive_attributes: z.array(z.unknown()).optional(),
          }),
        ),
      }),
    )
    .default([]),
});

/**
 * The managed resource instances of the refreshed state a saved plan file carries (its `tfstate`
 * entry: the engines' `prior_state`), each with the fields its cloud ids are read from
 * (`CLOUD_ID_FIELDS`) — no provider started. A field the state marks sensitive is left out, as
 * `readPlanForDrift` leaves out what `before_sensitive` marks. Throws when the file holds no state
 * of format version 4.
 */
export function readPlanStateResources(planFile: string): StateResource[] {
  const entries = unzipSync(readFileSync(planFile), { filter: (f) => f.name === 'tfstate' });
  const raw = entries.tfstate;
  if (!raw) throw new Error(`${planFile} carries no state snapshot`);
  const state = stateFileSchema.parse(JSON.parse(strFromU8(raw)));
  const out: StateResource[] = [];
  for (const r of state.resources) {
    if (r.mode !== 'managed') continue;
    const base = `${r.module ? `${r.module}.` : ''}${r.type}.${r.name}`;
    for (const i of r.instances) {
      if (i.deposed !== undefined) continue;
      const sensitive = new Set(
        (i.sensitive_attributes ?? []).flatMap((path) => {
          // A path of one step is a whole attribute; a deeper one leaves the attribute in.
          const steps = Array.isArray(path) ? (path as { type?: string; value?: unknown }[]) : [];
          return steps.length === 1 && steps[0]?.type === 'get_attr' && typeof steps[0].value === 'string'
            ? [steps[0].value]
            : [];
        }),
      );
      const values: Record<string, unknown> = {};
      for (const field of CLOUD_ID_FIELDS)
        if (i.attributes && field in i.attributes && !sensitive.has(field))
          values[field] = i.attributes[field];
      const key =
        i.index_key === undefined
          ? ''
          : typeof i.index_key === 'number'
            ? `[${i.index_key}]`
            : `[${JSON.stringify(i.index_key)}]`;
      out.push({ address: `${base}${key}`, type: r.type, values });
    }
  }
  return out;
}
