// The offline, deterministic model provider (the default; no key, no network). It declines
// create/modify requests, picks targets by matching resource names and addresses in the text
// against the configuration, and remediates by writing the real values from the plan into the HCL
// of drifted attributes it can edit safely (literal values, or jsonencode of literals). What it
// cannot edit safely stays unreconciled and is reported as such.
import type { DriftOperation } from '../../shared/drift';
import { applyEdits, reconcileOperation, Unfixable } from '../hcl-edit';
import { TerraformConfig } from '../terraform-config';
import { GENERATE_MISMATCH } from '../../shared/contracts';
import { offlineGenerate } from './offline-generate';
import {
  OPERATION_MISMATCH,
  type ConfigResource,
  type FilterDecision,
  type GenerateInput,
  type Generation,
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
  /\b(create|add|provision|deploy|spin up|launch|build|new|increase|decrease|resize|scale|upgrade|rename|delete|destroy|remove|modify|change|tag|open|close)\b/i;

/** Generate mode, the mirror of drift mode: create/modify requests in, drift requests out. */
export function offlineGenerateFilter(text: string): FilterDecision {
  if (DRIFT_WORDS.test(text)) return { accepted: false, reason: GENERATE_MISMATCH };
  if (CHANGE_WORDS.test(text) || /^\s*set\b/i.test(text))
    return { accepted: true, reason: 'The request asks to create or modify infrastructure.' };
  return {
    accepted: false,
    reason: 'The request does not ask to create or modify infrastructure.',
  };
}

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
  // One instance of a count/for_each block answers to its address and its own identifiers only.
  if (/\]$/.test(r.address)) return [r.address, ...(r.identifiers ?? [])].filter((v) => v.length >= 3);
  // Inside a module, bare names (`this`, `main`) say nothing: the address or identifiers only.
  const out = new Set(
    r.address.startsWith('module.') ? [r.address] : [r.address, r.name, r.name.replace(/_/g, '-')],
  );
  // Identifying string values in the block (ids, names) as a person would type them.
  for (const m of r.source.matchAll(/\b(?:id|name)\s*[=:]\s*"([^"$%]{3,})"/g)) if (m[1]) out.add(m[1]);
  for (const id of r.identifiers ?? []) out.add(id);
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

async function remediateOperation(
  op: DriftOperation,
  config: TerraformConfig,
  related: DriftOperation[],
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
  try {
    applyEdits(config.files, await reconcileOperation(config, op, related));
    return undefined;
  } catch (err) {
    if (err instanceof Unfixable) return { address: op.address, attributes: attrs, reason: err.message };
    throw err;
  }
}

export class OfflineModel implements ModelProvider {
  readonly name = 'offline';

  filterRequest(input: { text: string; mode?: 'drift' | 'generate' }): Promise<FilterDecision> {
    return Promise.resolve(
      input.mode === 'generate' ? offlineGenerateFilter(input.text) : offlineFilter(input.text),
    );
  }

  /** The stated offline set (activities/model/offline-generate.ts); a repair needs a model. */
  generate(input: GenerateInput): Promise<Generation> {
    if (input.feedback)
      return Promise.resolve({
        edits: [],
        declined: `The change did not validate (${input.feedback}); repairing it needs a language model.`,
        summary: '',
      });
    return offlineGenerate(input);
  }

  selectTargets(input: { text: string; resources: ConfigResource[] }): Promise<TargetSelection> {
    return Promise.resolve(offlineTargets(input.text, input.resources));
  }

  async remediate(input: {
    operations: DriftOperation[];
    files: SourceFile[];
    related?: DriftOperation[];
  }): Promise<Remediation> {
    const config = TerraformConfig.of(input.files);
    const original = new Map(config.files);
    const related = input.related ?? input.operations;
    const unremediable: Unremediable[] = [];
    try {
      for (const op of input.operations) {
        const before = new Map(config.files);
        const failure = await remediateOperation(op, config, related);
        if (failure) {
          unremediable.push(failure);
          for (const [k, v] of before) config.files.set(k, v); // leave nothing half-edited
        }
      }
    } finally {
      config.dispose();
    }
    const edits = [...config.files]
      .filter(([path, content]) => original.get(path) !== content)
      .map(([path, content]) => ({ path, content }));
    return { edits, unremediable };
  }

  pullRequest(f: PullRequestFacts): Promise<PullRequestText> {
    const drift = f.rounds.filter((r) => r.kind === 'partial' || r.kind === 'full');
    const generated = f.rounds.filter((r) => r.kind === 'generate');
    const title =
      generated.length > 0
        ? `Infrastructure changes (${generated.length} generate round${generated.length === 1 ? '' : 's'}, session ${f.session_id})`
        : drift.length === 0
          ? `Kumoss session ${f.session_id}`
          : `Reconcile drift (${drift.length} round${drift.length === 1 ? '' : 's'}, session ${f.session_id})`;
    const lines = [
      generated.length > 0
        ? `Merges \`${f.head}\` into \`${f.base}\`: the infrastructure changes requested in this session, and any drift reconciled on the way.`
        : `Merges \`${f.head}\` into \`${f.base}\`: code changes Kumoss made so that the Terraform code matches the real resources.`,
      '',
      ...drift.map(
        (r) =>
          `- **${r.round_id}** (${r.kind}, ${r.outcome ?? 'no outcome'}): ${r.text ?? ''}${r.summary ? `\n  ${r.summary}` : ''}`,
      ),
      ...generated.map(
        (r) => `- **${r.round_id}** (generate): ${r.text ?? ''}${r.summary ? `\n  ${r.summary}` : ''}`,
      ),
      '',
      generated.length > 0
        ? 'The reviewed plan of the last generate round is applied through Kumoss, which locks merging until then.'
        : 'Drift sessions end at this merge: no apply follows.',
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
