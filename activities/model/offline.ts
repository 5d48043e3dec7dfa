// The offline, deterministic model provider (the default; no key, no network). It declines
// create/modify requests, picks targets by matching resource names and addresses in the text
// against the configuration, and remediates by writing the real values from the plan into the HCL
// of drifted attributes it can edit safely (literal values, or jsonencode of literals). What it
// cannot edit safely stays unreconciled and is reported as such.
import { SENSITIVE, type DriftOperation } from '../../shared/drift';
import { findAttribute, listResources, renderHcl, splice } from '../hcl';
import {
  OPERATION_MISMATCH,
  type ConfigResource,
  type FilterDecision,
  type ModelProvider,
  type PullRequestFacts,
  type PullRequestText,
  type Remediation,
  type ReportFacts,
  type SourceFile,
  type TargetSelection,
  type Unremediable,
} from './port';

const DRIFT_WORDS =
  /\b(drift\w*|reconcil\w*|resolv\w*|revert\w*|restor\w*|sync\w*|out[- ]of[- ]band|outside (of )?terraform|in the console|console|manual(ly)? chang\w*|hotfix\w*|diverg\w*|scope)\b/i;
const CHANGE_WORDS =
  /\b(create|add|provision|deploy|spin up|launch|build|new|increase|decrease|resize|scale|upgrade|rename|delete|destroy|remove|modify|change)\b/i;

export function offlineFilter(text: string): FilterDecision {
  const drift = DRIFT_WORDS.test(text);
  if (drift) return { accepted: true, reason: 'The request asks to resolve or scope drift.' };
  if (CHANGE_WORDS.test(text)) return { accepted: false, reason: OPERATION_MISMATCH };
  return {
    accepted: false,
    reason: `${OPERATION_MISMATCH} It does not name drift to resolve.`,
  };
}

function nameVariants(r: ConfigResource): string[] {
  const out = new Set([r.address, r.name, r.name.replace(/_/g, '-')]);
  // Identifying string values in the block (ids, names) as a person would type them.
  for (const m of r.source.matchAll(/\b(?:id|name)\s*[=:]\s*"([^"$%]{3,})"/g)) if (m[1]) out.add(m[1]);
  return [...out].filter((v) => v.length >= 3);
}

export function offlineTargets(text: string, resources: ConfigResource[]): TargetSelection {
  const lower = text.toLowerCase();
  const hit = (v: string): boolean => {
    const i = lower.indexOf(v.toLowerCase());
    if (i < 0) return false;
    const before = lower[i - 1] ?? ' ';
    const after = lower[i + v.length] ?? ' ';
    return !/[a-z0-9_-]/.test(before) && !/[a-z0-9_-]/.test(after);
  };
  const targets = resources.filter((r) => nameVariants(r).some(hit)).map((r) => r.address);
  return targets.length > 0
    ? { targets: [...new Set(targets)].sort(), reason: `Matched ${targets.join(', ')} in the request.` }
    : { targets: [], reason: 'No resource of the configuration is named in the request.' };
}

function setPath(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let node: Record<string, unknown> = obj;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  const last = path[path.length - 1] as string;
  if (value === undefined) delete node[last];
  else node[last] = value;
}

async function remediateOperation(
  op: DriftOperation,
  files: Map<string, string>,
  resourceFile: Map<string, string>,
): Promise<Unremediable | undefined> {
  const attrs = op.changes.map((c) => c.path || '*');
  if (op.drift_actions.includes('delete')) {
    return {
      address: op.address,
      attributes: attrs,
      reason:
        'The resource no longer exists; whether to recreate it or remove it from the code is a decision for a person.',
    };
  }
  const file = resourceFile.get(op.address);
  if (!file)
    return {
      address: op.address,
      attributes: attrs,
      reason: 'The resource is not declared in the root module.',
    };
  for (const [top, { declared, actual }] of Object.entries(op.attributes)) {
    if (declared === SENSITIVE) {
      return {
        address: op.address,
        attributes: attrs,
        reason: `Attribute ${top} is sensitive; its value is never copied into code.`,
      };
    }
    const text = files.get(file) as string;
    const loc = await findAttribute(text, op.type, op.name, top);
    if (!loc) {
      return {
        address: op.address,
        attributes: attrs,
        reason: `Attribute ${top} is not set in the code (computed or defaulted).`,
      };
    }
    if (!loc.literal) {
      return {
        address: op.address,
        attributes: attrs,
        reason: `Attribute ${top} is computed from expressions; rewriting it needs a person.`,
      };
    }
    const subChanges = op.changes.filter((c) => c.path === top || c.path.startsWith(`${top}.`));
    let rendered: string;
    if (
      typeof declared === 'string' &&
      typeof actual === 'string' &&
      subChanges.some((c) => c.path !== top)
    ) {
      // A JSON document in a string attribute: change only the drifted paths of the declared value.
      const value = JSON.parse(declared) as Record<string, unknown>;
      for (const c of subChanges) setPath(value, c.path.split('.').slice(1), c.actual);
      const order = JSON.parse(declared) as unknown;
      rendered = loc.jsonencoded
        ? `jsonencode(${renderHcl(value, loc.indent, order)})`
        : renderHcl(JSON.stringify(value));
    } else {
      rendered = renderHcl(actual, loc.indent, declared);
    }
    files.set(file, splice(text, loc.start, loc.end, rendered));
  }
  return undefined;
}

export class OfflineModel implements ModelProvider {
  readonly name = 'offline';

  filterRequest(input: { text: string }): Promise<FilterDecision> {
    return Promise.resolve(offlineFilter(input.text));
  }

  selectTargets(input: { text: string; resources: ConfigResource[] }): Promise<TargetSelection> {
    return Promise.resolve(offlineTargets(input.text, input.resources));
  }

  async remediate(input: { operations: DriftOperation[]; files: SourceFile[] }): Promise<Remediation> {
    const files = new Map(input.files.map((f) => [f.path, f.content]));
    const resourceFile = new Map<string, string>();
    for (const f of input.files)
      for (const r of await listResources(f.content)) resourceFile.set(r.address, f.path);
    const unremediable: Unremediable[] = [];
    for (const op of input.operations) {
      const before = new Map(files);
      const failure = await remediateOperation(op, files, resourceFile);
      if (failure) {
        unremediable.push(failure);
        for (const [k, v] of before) files.set(k, v); // leave nothing half-edited
      }
    }
    const edits = input.files
      .filter((f) => files.get(f.path) !== f.content)
      .map((f) => ({ path: f.path, content: files.get(f.path) as string }));
    return { edits, unremediable };
  }

  pullRequest(f: PullRequestFacts): Promise<PullRequestText> {
    const drift = f.rounds.filter((r) => r.kind === 'partial' || r.kind === 'full');
    const title =
      drift.length === 0
        ? `Kumoss session ${f.session_id}`
        : `Reconcile drift (${drift.length} round${drift.length === 1 ? '' : 's'}, session ${f.session_id})`;
    const lines = [
      `Merges \`${f.head}\` into \`${f.base}\`: code changes Kumoss made so that the Terraform code matches the real resources.`,
      '',
      ...drift.map(
        (r) =>
          `- **${r.round_id}** (${r.kind}, ${r.outcome ?? 'no outcome'}): ${r.text ?? ''}${r.summary ? `\n  ${r.summary}` : ''}`,
      ),
      '',
      'Drift sessions end at this merge: no apply follows.',
    ];
    return Promise.resolve({ title, description: lines.join('\n') });
  }

  summarize(f: ReportFacts): Promise<string> {
    const parts: string[] = [];
    parts.push(
      f.remediated.length > 0
        ? `Reconciled the code with reality for ${f.remediated.length} resource(s): ${f.remediated.join(', ')}.`
        : 'No code change was needed or possible.',
    );
    if (f.unreconciled.length > 0) {
      parts.push(
        `${f.unreconciled.length} drifted resource(s) left unreconciled: ${f.unreconciled.map((u) => u.address).join(', ')}.`,
      );
    }
    if (f.whitelisted.length > 0) {
      parts.push(
        `${f.whitelisted.length} drift item(s) left alone under exception rules: ${f.whitelisted.map((w) => `${w.address} (${w.rule_id})`).join(', ')}.`,
      );
    }
    parts.push(`Outcome: ${f.outcome}.`);
    return Promise.resolve(parts.join(' '));
  }
}
