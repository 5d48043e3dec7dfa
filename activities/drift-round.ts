// The activities of a drift round. Each takes one object and returns one small object: plans,
// drift reports and operation lists go to object storage under deterministic keys
// (sessions/<session>/rounds/<round>/…) and only their keys travel through workflow history.
// Every activity is idempotent: a retried cycle finds its commit by trailer instead of committing
// twice, a retried push of a pushed commit is a no-op, an artifact is overwritten in place.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { Context, log } from '@temporalio/activity';
import pLimit from 'p-limit';
import { ApplicationFailure } from '@temporalio/common';
import { deriveDrift, groupDriftOperations, type DriftOperation } from '../shared/drift';
import { applyExceptions, type WhitelistedException } from '../shared/drift-exceptions';
import {
  computeOutcome,
  driftReportSchema,
  type DriftReport,
  type UnreconciledDrift,
} from '../shared/drift-report';
import { ErrorTypes } from '../shared/errors';
import { roundArtifactKey } from '../shared/ids';
import type { ArtifactStore } from '../shared/infra/object-store';
import { toActivityFailure } from './drift-detection';
import { diffHistory } from './diff-history';
import { EngineError, type EngineClient } from './engine';
import { GitError, hasMarkerLine, type GitClient } from './git';
import {
  applyReplacements,
  formatChanged,
  newFmtCache,
  replacementOf,
  type FmtCache,
  type Replacement,
} from './fmt-regions';
import { blockAddress } from './hcl-edit';
import { confinedEditTarget, ModelEditRefused } from './model-edits';
import { modulePrefixes, TerraformConfig } from './terraform-config';
import { readPlanForDrift, readStateResources } from './plan-reader';
import type {
  ConfigResource,
  FilterDecision,
  ModelProvider,
  Remediation,
  SourceFile,
  TargetSelection,
  Unremediable,
} from './model/port';
import type { PromptCatalogue } from './prompt-catalogue';
import { readConfigFiles, type RoundRef, type RoundWorkspaces, type Workspace } from './workspace';

export interface DriftRoundDeps {
  workspaces: RoundWorkspaces;
  git: GitClient;
  artifacts: ArtifactStore;
  model: ModelProvider;
  catalogue: PromptCatalogue;
  /** Model requests one iteration's proposals have in flight at once (default 4). */
  modelConcurrency?: number;
}

export interface PrepareRoundOutput {
  rules: NonNullable<RoundRef['rules']>;
  baseCommit: string;
  /** The session branch's commit the round starts from. */
  head?: string;
  resourceCount: number;
  promptKey: string;
}

import type {
  CommitProposalsInput,
  ConfirmInput,
  ConfirmOutput,
  CycleInput,
  IterationInput,
  IterationOutput,
  ProposeInput,
  ProposeOutput,
  TakeBackInput,
  TakeBackOutput,
} from '../shared/round-contracts';

export interface GenerateOutput {
  changed: boolean;
  commit?: string;
  files: string[];
  unremediableCount: number;
  resultKey: string;
}

/** A cycle's change committed in the checkout, its push still to come (commitCycle). */
interface CommittedCycle {
  output: GenerateOutput;
  marker: string;
  /** Where its diff is stored. */
  diffKey: string;
  /** Uploads begun after its commit: settled before the cycle is reported. */
  saves: Promise<unknown>[];
}

/** A cycle's recorded result: the generate answer, why drift stays, why validation failed. */
type CycleResult = GenerateOutput & { unremediable: Unremediable[]; validation_failure?: string };

/** What a whole-root validation that did not plan at first found and did (confirm.json). */
interface ConfirmRecord {
  disagreement?: string;
  reverted: number[];
  /** The whole-root plan of the last group kept (absent: none was). */
  planKey?: string;
  planClean?: boolean;
}

export interface ValidateOutput {
  valid: boolean;
  planKey?: string;
  /** The plan changes nothing (exit code 0): IterationInput.planClean. */
  planClean?: boolean;
  reinitialized: boolean;
  reason?: string;
  /** The branch's commit after the step (the revert of an invalid change). */
  head?: string;
}

export interface ReportInput {
  ref: RoundRef;
  mode: 'partial' | 'full';
  text: string;
  baseCommit: string;
  iterations: number;
  /** The last examination: its live drift is what stays unreconciled. */
  finalOperationsKey?: string;
  whitelistedKey?: string;
  /** Result keys of every generate cycle (their unremediable lists give the reasons). */
  cycleResultKeys: string[];
}

export interface ReportOutput {
  reportKey: string;
  outcome: DriftReport['outcome'];
  summary: string;
  remediated: string[];
  unreconciledCount: number;
  whitelistedCount: number;
  changed: boolean;
}

export function hooks() {
  const ctx = Context.current();
  return { signal: ctx.cancellationSignal, heartbeat: (d: string) => ctx.heartbeat(d) };
}

export const key = (ref: RoundRef, name: string) => roundArtifactKey(ref.sessionId, ref.roundId, name);
const proposalKey = (ref: RoundRef, iteration: string, group: number) =>
  key(ref, `iteration-${iteration}/group-${group}/proposal.json`);
const resultKeyOf = (ref: RoundRef, iteration: string, group: number) =>
  key(ref, `iteration-${iteration}/group-${group}/remediation.json`);
const changesPrefix = (ref: RoundRef, iteration: string, group: number) =>
  key(ref, `iteration-${iteration}/group-${group}/changes`);

/** A cycle's answer before its commit: what its result records until then. */
const answerOf = (remediation: Remediation, resultKey: string): GenerateOutput => ({
  changed: false,
  files: remediation.edits.map((e) => e.path),
  unremediableCount: remediation.unremediable.length,
  resultKey,
});

/** Model requests `proposeRemediations` has in flight at once (model.max_concurrent). */
export const DEFAULT_MODEL_CONCURRENCY = 4;

/**
 * A group's change proposed before its cycle (proposeRemediations): each edited file's text when
 * the cycle begins (null: absent) and the text the cycle writes — formatted, and merged onto what
 * the groups before it proposed.
 */
interface Proposal {
  files: { path: string; before: string | null; after: string }[];
  unremediable: Unremediable[];
}
/** A proposal as the cycle's change: each edited file's text after it. */
const remediationOf = (proposal: Proposal): Remediation => ({
  edits: proposal.files.map((f) => ({ path: f.path, content: f.after })),
  unremediable: proposal.unremediable,
});
/** A file's text in the checkout (null: absent). */
const textAt = (target: string): string | null => (existsSync(target) ? readFileSync(target, 'utf8') : null);
const cycleMarker = (ref: RoundRef, iteration: string, group: number) =>
  `Kumoss-Cycle: ${ref.sessionId}/${ref.roundId}/${iteration}/${group}`;

/** The resources of the root and of the local modules it calls, with their module path. */
export async function configResources(iacDir: string, checkoutDir: string): Promise<ConfigResource[]> {
  const config = TerraformConfig.of(await readConfigFiles(iacDir, checkoutDir));
  try {
    const prefixes = await modulePrefixes(config);
    const out: ConfigResource[] = [];
    for (const [dir, pres] of prefixes) {
      for (const b of await config.blocks(dir, 'resource')) {
        const [type, name] = b.labels as [string, string];
        for (const p of pres) {
          out.push({ address: `${p}${type}.${name}`, type, name, file: b.file, source: b.node.text });
        }
      }
    }
    for (const call of await config.allModuleCalls()) {
      for (const p of prefixes.get(call.parentDir) ?? []) {
        const address = `${p}module.${call.name}`;
        out.push({ address, type: 'module', name: address, file: call.file, source: '' });
      }
    }
    return out;
  } finally {
    config.dispose();
  }
}

/**
 * What people call the resources that exist: cloud ids, ARNs, `Name` tags and names from the
 * state, by instance address (`aws_instance.worker[1]`). Empty when there is no state yet.
 */
async function stateIdentifiers(ws: Workspace): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const file = join(ws.scratch, `state-${Date.now()}.json`);
  try {
    await ws.engine.stateJson(file);
    for (const r of readStateResources(file)) {
      const v = r.values;
      const tags = (v.tags ?? {}) as Record<string, unknown>;
      const ids = [v.id, v.arn, tags.Name, v.name, v.bucket].filter(
        (x): x is string => typeof x === 'string' && x.length >= 3,
      );
      out.set(r.address, [...new Set(ids)]);
    }
  } catch {
    // No state yet (nothing applied) or no backend access: targets come from the code alone.
  } finally {
    rmSync(file, { force: true });
  }
  return out;
}

/** Config resources plus one entry per instance the state knows, carrying its identifiers. */
async function targetableResources(ws: Workspace): Promise<ConfigResource[]> {
  const resources = await configResources(ws.iacDir, ws.dir);
  const byAddress = new Map(resources.map((r) => [r.address, r]));
  for (const [address, identifiers] of await stateIdentifiers(ws)) {
    const block = byAddress.get(blockAddress(address));
    if (!block) continue;
    if (address === block.address) block.identifiers = identifiers;
    else resources.push({ ...block, address, identifiers });
  }
  return resources;
}

/**
 * Marks a promise that is awaited later as handled now: one that fails while the activity still
 * awaits something else is not an unhandled rejection (which would end the worker); awaiting it
 * still fails the attempt with its error.
 */
export function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

export async function getJson<T>(artifacts: ArtifactStore, k: string): Promise<T> {
  return JSON.parse(await artifacts.getText(k)) as T;
}

/** Where a model's edit of `path` (relative to the IaC root) goes; a path outside the checkout is refused. */
function editTarget(ws: Workspace, path: string): string {
  try {
    return confinedEditTarget(ws.dir, ws.iacDir, path);
  } catch (err) {
    if (err instanceof ModelEditRefused)
      throw ApplicationFailure.nonRetryable(err.message, ErrorTypes.InvalidInput);
    throw err;
  }
}

/** Files fmt formats. */
const FORMATTED_FILE = /\.(tf|tfvars)$/;

/**
 * What an edit changes in a file kept in canonical form stays so: each edited file's changed
 * paragraphs, before and after, through one fmt process (formatChanged), each new text's changed
 * part replaced by fmt's where its original was canonical; a text fmt rejects is left as it is —
 * the validation cycle will say why. `cache` carries what fmt read from one call to the next.
 */
async function keepCanonical(
  engine: EngineClient,
  changes: { edit: { path: string; content: string }; original: string | undefined }[],
  cache: FmtCache = newFmtCache(),
): Promise<void> {
  const formattable = changes.filter(
    (c): c is { edit: { path: string; content: string }; original: string } =>
      c.original !== undefined && FORMATTED_FILE.test(c.edit.path),
  );
  const out = await formatChanged(
    engine,
    formattable.map((c) => ({
      original: c.original,
      text: c.edit.content,
      tfvars: c.edit.path.endsWith('.tfvars'),
    })),
    cache,
  );
  formattable.forEach((c, i) => {
    const r = out[i];
    if (r?.canonical && r.formatted !== undefined) c.edit.content = r.formatted;
  });
}

/**
 * Writes a model's edits into the checkout (a drift cycle's remediation, a generate round's
 * change): a path outside the repository is refused; a file that was in canonical form stays in it
 * (`fmt`: small diffs that fmt leaves alone); each new text is stored under `changesPrefix`. Returns
 * the uploads, for the caller to await beside its own writes, and the edited paths relative to the
 * checkout (what the commit takes). `formatted`: the texts went through fmt already (a proposal);
 * `stored`: the texts are stored already (none uploaded).
 */
export async function writeModelEdits(
  ws: Workspace,
  artifacts: ArtifactStore,
  edits: { path: string; content: string }[],
  originals: Map<string, string>,
  changesPrefix: string,
  opts: { formatted?: boolean; stored?: boolean } = {},
): Promise<{ uploads: Promise<unknown>[]; edited: string[] }> {
  const uploads: Promise<unknown>[] = [];
  // Every path is checked before anything is written: one refused edit writes none of them.
  const targets = edits.map((e) => editTarget(ws, e.path));
  if (!opts.formatted)
    await keepCanonical(
      ws.engine,
      edits.map((e) => ({ edit: e, original: originals.get(e.path) })),
    );
  for (const [i, e] of edits.entries()) {
    const target = targets[i] ?? '';
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, e.content);
    if (!opts.stored) uploads.push(handled(storeEditText(artifacts, changesPrefix, e)));
  }
  return { uploads, edited: targets.map((t) => relative(ws.dir, t)) };
}

/** An edit's new text, stored under `changesPrefix` (writeModelEdits). */
const storeEditText = (
  artifacts: ArtifactStore,
  changesPrefix: string,
  e: { path: string; content: string },
) => artifacts.putText(`${changesPrefix}/${e.path.replace(/\.\.\//g, '_up_/')}`, e.content);

/** The report of an iteration that reads the plan the last cycle validated and finds no drift. */
const IN_SYNC = 'No drift: the plan validated by the last cycle is in sync.\n';

export function createDriftRoundActivities(deps: DriftRoundDeps) {
  const { workspaces, git, artifacts, model, catalogue } = deps;

  /** The model's change for one group's operations, asked on `files` (the root's as they are). */
  const askModel = (ref: RoundRef, ops: DriftOperation[], files: SourceFile[], all: DriftOperation[]) =>
    model.remediate({
      operations: ops,
      files,
      related: all,
      prompt: catalogue.compose(
        ref.cloud,
        ops.map((o) => o.type),
        '',
      ),
    });

  /** The operations of one group of an iteration. */
  const groupOperations = async (operationsKey: string, groupSize: number, group: number) =>
    groupDriftOperations(await getJson<DriftOperation[]>(artifacts, operationsKey), groupSize)[group] ?? [];

  /**
   * A cycle whose change is taken back: its result says why each of its operations stays
   * unreconciled (written before the branch moves, so a retry finds it).
   */
  const recordTakenBack = async (
    input: { ref: RoundRef; iteration: string; operationsKey: string; groupSize: number },
    group: number,
    failure: string,
    reason: string,
  ): Promise<void> => {
    const resultKey = resultKeyOf(input.ref, input.iteration, group);
    const [result, ops] = await Promise.all([
      getJson<CycleResult>(artifacts, resultKey),
      groupOperations(input.operationsKey, input.groupSize, group),
    ]);
    result.unremediable = ops.map((o) => ({
      address: o.address,
      attributes: o.changes.map((c) => c.path || '*'),
      reason,
    }));
    result.validation_failure = failure;
    await artifacts.putJson(resultKey, result);
  };

  /**
   * A generate cycle up to its commit: the group's proposal when the files it edits hold what it
   * expects, else the model's answer, written and committed on the checkout (started from the
   * branch's last commit). A retry that finds the cycle's commit reports it.
   */
  const commitCycle = async (
    ws: Workspace,
    input: CycleInput,
    operations: Promise<DriftOperation[]>,
    /**
     * Looked up beforehand (commitProposals): the cycle's commit on the branch, its proposal, and
     * whether the proposal's answer is stored already (storeProposedAnswers).
     */
    ahead?: { found: string | undefined; proposal?: Promise<Proposal>; stored?: boolean },
  ): Promise<CommittedCycle> => {
    const { ref, iteration, group } = input;
    const resultKey = resultKeyOf(ref, iteration, group);
    const diffKey = key(ref, `iteration-${iteration}/group-${group}/changes.diff`);
    const marker = cycleMarker(ref, iteration, group);
    // With a proposal, the files are read only when it no longer fits (the model is asked then).
    const readFiles = () => readConfigFiles(ws.iacDir, ws.dir);
    const [found, proposal, read] = await Promise.all([
      ahead ? ahead.found : git.commitsByMarker(ws.dir, [marker]).then((c) => c.get(marker)),
      input.proposal
        ? (ahead?.proposal ?? handled(getJson<Proposal>(artifacts, proposalKey(ref, iteration, group))))
        : undefined,
      input.proposal ? undefined : readFiles(),
    ]);
    if (found) {
      // This cycle already committed (a retry after a crash): report that commit, do not redo it.
      const {
        unremediable: _u,
        validation_failure: _v,
        ...previous
      } = await getJson<CycleResult>(artifacts, resultKey);
      return { output: { ...previous, changed: true, commit: found }, marker, diffKey, saves: [] };
    }
    const all = await operations;
    const ops = groupDriftOperations(all, input.groupSize)[group] ?? [];
    // The proposal is this cycle's change when every file it edits holds what it expects.
    const fits = proposal?.files.every((f) => textAt(editTarget(ws, f.path)) === f.before) === true;
    const files = fits ? [] : (read ?? (await readFiles()));
    const remediation: Remediation =
      proposal && fits ? remediationOf(proposal) : await askModel(ref, ops, files, all);
    const stored = fits && ahead?.stored === true;
    const { uploads: changeUploads, edited } = await writeModelEdits(
      ws,
      artifacts,
      remediation.edits,
      new Map(files.map((f) => [f.path, f.content])),
      changesPrefix(ref, iteration, group),
      { formatted: fits, stored },
    );
    const result = answerOf(remediation, resultKey);
    // The answer is stored before the commit exists: a retry that finds the commit reads it.
    if (!stored)
      await Promise.all([
        ...changeUploads,
        artifacts.putJson(resultKey, { ...result, unremediable: remediation.unremediable }),
      ]);
    if (remediation.edits.length === 0) return { output: result, marker, diffKey, saves: [] };
    const addresses = ops
      .filter((o) => !remediation.unremediable.some((u) => u.address === o.address))
      .map((o) => o.address);
    const message = `Reconcile drift: ${addresses.join(', ') || 'code changes'}\n\nRound ${ref.roundId}, iteration ${iteration}, group ${group + 1}.\n\n${marker}`;
    const commit = await git.commitAll(ws.dir, message, edited);
    const done = { ...result, changed: commit.created, commit: commit.sha };
    return {
      output: done,
      marker,
      diffKey,
      saves: [
        ...(commit.created ? [handled(saveDiff(ws, diffKey, commit.sha))] : []),
        handled(artifacts.putJson(resultKey, { ...done, unremediable: remediation.unremediable })),
      ],
    };
  };

  /**
   * Every answer of the proposals `groups` commit, stored at once before the first commit — when
   * each proposal fits the checkout as the ones before it leave it (every file it edits holds what
   * it expects), as is usual: their cycles then commit one after the other without a store between.
   * False (nothing stored) when one does not fit: each cycle stores its own answer, as a cycle does.
   */
  const storeProposedAnswers = async (
    ws: Workspace,
    input: CommitProposalsInput,
    groups: number[],
    proposals: Map<number, Promise<Proposal>>,
  ): Promise<boolean> => {
    const texts = new Map<string, string | null>();
    const textOf = (path: string) => {
      const target = editTarget(ws, path);
      if (!texts.has(target)) texts.set(target, textAt(target));
      return { target, text: texts.get(target) };
    };
    const answers: { group: number; remediation: Remediation }[] = [];
    for (const group of groups) {
      const proposal = await proposals.get(group);
      if (!proposal?.files.every((f) => textOf(f.path).text === f.before)) return false;
      for (const f of proposal.files) texts.set(textOf(f.path).target, f.after);
      answers.push({ group, remediation: remediationOf(proposal) });
    }
    const { ref, iteration } = input;
    await Promise.all(
      answers.flatMap(({ group, remediation }) => {
        const resultKey = resultKeyOf(ref, iteration, group);
        return [
          ...remediation.edits.map((e) => storeEditText(artifacts, changesPrefix(ref, iteration, group), e)),
          artifacts.putJson(resultKey, {
            ...answerOf(remediation, resultKey),
            unremediable: remediation.unremediable,
          }),
        ];
      }),
    );
    return true;
  };

  const saveDiff = async (ws: Workspace, diffKey: string, sha: string): Promise<void> => {
    const diff = await git.run(['show', '--format=', '--no-color', sha], ws.dir);
    await artifacts.putText(diffKey, diff, 'text/x-diff');
  };

  /**
   * The committed cycles pushed in one push, beside their uploads. When an earlier attempt's push
   * of them landed after all (the checkout is reset to it), its commits are the cycles': one push
   * carries every cycle of it, each found by its marker.
   */
  const pushCycles = async (
    ws: Workspace,
    ref: RoundRef,
    cycles: CommittedCycle[],
  ): Promise<GenerateOutput[]> => {
    const last = cycles.findLast((c) => c.output.commit !== undefined);
    const [adopted] = await Promise.all([
      last ? ws.git.pushCycle(ws.dir, ref.branch, last.marker) : undefined,
      ...cycles.flatMap((c) => c.saves),
    ]);
    if (!adopted) return cycles.map((c) => c.output);
    const pushed = await git.commitsByMarker(
      ws.dir,
      cycles.map((c) => c.marker),
    );
    return Promise.all(
      cycles.map(async (c) => {
        if (!c.output.changed) return c.output;
        const sha = pushed.get(c.marker);
        // Not on the branch pushed before: the retry commits it again.
        if (!sha) throw new Error(`The branch ${ref.branch} on the remote lacks the commit of ${c.marker}`);
        // The cycle's recorded result names the adopted commit, as its answer does.
        const recorded = await getJson<CycleResult>(artifacts, c.output.resultKey);
        await Promise.all([
          saveDiff(ws, c.diffKey, sha),
          artifacts.putJson(c.output.resultKey, { ...recorded, commit: sha }),
        ]);
        return { ...c.output, changed: true, commit: sha };
      }),
    );
  };

  /** Why a cycle's change that does not validate stays unreconciled. */
  const notValid = (message: string) => `The proposed change did not validate (${message}); it was reverted.`;

  /**
   * A cycle's plan in `at` (the round's checkout or a snapshot of the cycle's commit): of its
   * group's addresses with `scope: 'group'`, else of the round's targets; stored with its output.
   */
  const planCycle = async (
    at: { scratch: string; engine: EngineClient },
    input: CycleInput,
    lock?: false,
  ): Promise<ValidateOutput> => {
    const { ref, iteration, group } = input;
    const planFile = join(at.scratch, `${ref.roundId}-${iteration}-${group}.tfplan`);
    const targets =
      input.scope === 'group'
        ? (
            await Promise.all(
              [...(input.with ?? []), group].map((g) =>
                groupOperations(input.operationsKey, input.groupSize, g),
              ),
            )
          ).flatMap((ops) => ops.map((o) => o.address))
        : input.targets;
    const plan = await at.engine.planValidated(
      { out: planFile, targets, ...(lock === false ? { lock } : {}) },
      hooks(),
    );
    const planKey = key(ref, `iteration-${iteration}/group-${group}/plan.tfplan`);
    await Promise.all([
      artifacts.putFile(planKey, planFile),
      artifacts.putText(key(ref, `iteration-${iteration}/group-${group}/plan.txt`), plan.output),
    ]);
    return { valid: true, planKey, planClean: !plan.hasChanges, reinitialized: plan.reinitialized };
  };

  /**
   * A group's targeted plan of its cycle's commit, in the round's snapshot checkout, while the next
   * cycle works on the branch: the branch is left alone. A change that does not plan has its
   * reason recorded in its cycle's result; takeBackGroups takes it back after the iteration's cycles.
   */
  const validateAt = async (
    input: CycleInput,
    commit: string,
    opts: { record: boolean; without?: string[] } = { record: true },
  ): Promise<ValidateOutput> => {
    const { ref, group } = input;
    // A commit id, never an option or a ref name git would read otherwise.
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit))
      throw ApplicationFailure.nonRetryable(`Not a commit id: ${commit}`, ErrorTypes.InvalidInput);
    if (input.with?.some((g) => !Number.isInteger(g) || g < 0 || g >= group))
      throw ApplicationFailure.nonRetryable(
        `Groups planned with group ${group} come before it: ${input.with.join(', ')}`,
        ErrorTypes.InvalidInput,
      );
    const snap = await workspaces.snapshot(ref, commit);
    try {
      if (opts.without?.length) {
        // Earlier changes taken out of the checkout (uncommitted: the next snapshot resets it), so
        // this change is planned apart from theirs. One that does not come apart fails with them.
        try {
          await git.run(['revert', '--no-commit', ...[...opts.without].reverse()], snap.dir);
        } catch {
          return {
            valid: false,
            reinitialized: false,
            reason: 'it does not apply without the changes taken back before it',
          };
        } finally {
          await git.run(['revert', '--quit'], snap.dir).catch(() => undefined);
        }
      }
      // Without the state lock, as a detection's: the plan only reads (it is never applied; the
      // whole root's plan after the cycles takes the lock), and a retry's plan may still overlap
      // the attempt it replaces.
      return await planCycle(snap, input, false);
    } catch (err) {
      if (err instanceof EngineError && err.permanent) {
        // Groups planned together: whose change failed is not known yet — each is planned again.
        if (opts.record && !input.with?.length)
          await recordTakenBack(input, group, err.message, notValid(err.message));
        return { valid: false, reinitialized: false, reason: err.message };
      }
      throw toActivityFailure(err);
    } finally {
      snap.release();
    }
  };

  return {
    /** Checks out the session branch, loads the cloud's exception rules, composes the prompt. */
    async prepareRound(input: { ref: RoundRef; text: string }): Promise<PrepareRoundOutput> {
      try {
        const ws = await workspaces.get(input.ref);
        // The engine's init runs while the root is read and the prompt stored (the next step needs
        // it; a failure here is left to that step, which runs init again and says why). Its
        // process is under way before the root's parse holds the event loop.
        let started = (): void => undefined;
        const starting = new Promise<void>((resolve) => (started = resolve));
        const init = ws.engine
          .ensureInit({ ...hooks(), onStart: started })
          .catch(() => false)
          .finally(started);
        await starting;
        const rules = catalogue.driftExceptions(input.ref.cloud).rules;
        const resources = await configResources(ws.iacDir, ws.dir);
        const prompt = catalogue.compose(
          input.ref.cloud,
          resources.map((r) => r.type),
          input.text,
        );
        const promptKey = key(input.ref, 'prompt.md');
        const [, baseCommit, head] = await Promise.all([
          artifacts.putText(promptKey, prompt, 'text/markdown; charset=utf-8'),
          (async () => {
            const baseRef = input.ref.baseBranch
              ? `origin/${input.ref.baseBranch}`
              : (await git.run(['symbolic-ref', '--short', 'refs/remotes/origin/HEAD'], ws.dir)).trim();
            return (await git.run(['merge-base', baseRef, 'HEAD'], ws.dir)).trim();
          })(),
          git.run(['rev-parse', 'HEAD'], ws.dir).then((o) => o.trim()),
        ]);
        await init;
        return { rules, baseCommit, head, resourceCount: resources.length, promptKey };
      } catch (err) {
        if (
          err instanceof Error &&
          /does not exist|leaves the repository|not found|Repository not found/i.test(err.message)
        ) {
          throw ApplicationFailure.nonRetryable(err.message, ErrorTypes.RepositoryNotFound);
        }
        if (err instanceof Error && err.name === 'CatalogueError') {
          throw ApplicationFailure.nonRetryable(err.message, ErrorTypes.InvalidInput);
        }
        throw err;
      }
    },

    async filterRequest(input: { ref: RoundRef; text: string }): Promise<FilterDecision> {
      return model.filterRequest({ text: input.text, prompt: catalogue.targetingPolicies() });
    },

    async selectTargets(input: { ref: RoundRef; text: string }): Promise<TargetSelection> {
      const ws = await workspaces.get(input.ref);
      const resources = await targetableResources(ws);
      const selection = await model.selectTargets({
        text: input.text,
        resources,
        prompt: catalogue.compose(
          input.ref.cloud,
          resources.map((r) => r.type),
          input.text,
        ),
      });
      const known = new Set(resources.map((r) => r.address));
      const targets = selection.targets.filter((t) => known.has(t));
      await artifacts.putJson(key(input.ref, 'targets.json'), { ...selection, targets });
      return { ...selection, targets };
    },

    /** Targets chosen beforehand (drift inbox items): those the root still has, and why. */
    async pinTargets(input: { ref: RoundRef; targets: string[] }): Promise<TargetSelection> {
      const ws = await workspaces.get(input.ref);
      const known = new Set((await targetableResources(ws)).map((r) => r.address));
      const targets = [...new Set(input.targets)].filter((t) => known.has(t));
      const gone = input.targets.filter((t) => !known.has(t));
      const reason =
        targets.length === 0
          ? `None of the chosen resources is in the root any more: ${gone.join(', ')}.`
          : `Chosen beforehand${gone.length ? `; no longer in the root: ${gone.join(', ')}` : ''}.`;
      await artifacts.putJson(key(input.ref, 'targets.json'), { targets, reason, chosen: input.targets });
      return { targets, reason };
    },

    /** Plans (or reads the plan the last cycle validated), derives the drift, drops exceptions. */
    async planIteration(input: IterationInput): Promise<IterationOutput> {
      const { ref, iteration } = input;
      try {
        const operationsKey = key(ref, `iteration-${iteration}/operations.json`);
        const whitelistedKey = key(ref, `iteration-${iteration}/whitelisted.json`);
        if (input.planKey && input.planClean) {
          // The validated plan changes nothing: no drift (IterationInput.planClean), nothing to read.
          const reportKey = key(ref, `iteration-${iteration}/plan.txt`);
          await Promise.all([
            artifacts.putText(reportKey, IN_SYNC),
            artifacts.putJson(operationsKey, []),
            artifacts.putJson(whitelistedKey, []),
          ]);
          return {
            inSync: true,
            driftCount: 0,
            operationCount: 0,
            whitelistedCount: 0,
            groupCount: 0,
            planKey: input.planKey,
            reportKey,
            operationsKey,
            whitelistedKey,
            planned: false,
            reinitialized: false,
          };
        }
        const ws = await workspaces.get(ref);
        const h = hooks();
        const planFile = join(ws.scratch, `${ref.roundId}-${iteration}.tfplan`);
        let planKey = input.planKey;
        let reinitialized = false;
        // Uploads run while the engine works: they are off the round's critical path (each marked
        // handled, so one failing while the engine still runs is the attempt's error, not the
        // worker's).
        const uploads: Promise<unknown>[] = [];
        const track = (...started: Promise<unknown>[]) => {
          for (const p of started) uploads.push(handled(p));
        };
        if (planKey) {
          await artifacts.download(planKey, planFile);
          await ws.engine.ensureInit(h);
        } else {
          // The seed's first iteration: init, plan -out (init runs inside, once per round), which
          // validates the configuration first; a seed that does not validate fails with validate's
          // diagnostic (planValidated), and no validate process takes CPU from the plan.
          const plan =
            iteration === '1'
              ? await ws.engine.planValidated({ out: planFile, targets: input.targets }, h)
              : await ws.engine.plan({ out: planFile, targets: input.targets }, h);
          reinitialized = plan.reinitialized;
          planKey = key(ref, `iteration-${iteration}/plan.tfplan`);
          track(
            artifacts.putFile(planKey, planFile),
            artifacts.putText(key(ref, `iteration-${iteration}/plan.txt`), plan.output),
          );
        }
        const jsonFile = `${planFile}.json`;
        await ws.engine.showJson(planFile, jsonFile, h);
        track(artifacts.putFile(key(ref, `iteration-${iteration}/plan.json`), jsonFile, 'application/json'));
        const plan = await readPlanForDrift(jsonFile);
        const drift = deriveDrift(plan);
        const inSync = drift.length === 0;
        const reportKey = key(
          ref,
          inSync ? `iteration-${iteration}/plan.txt` : `iteration-${iteration}/drift-report.json`,
        );
        if (inSync && input.planKey) {
          track(artifacts.putText(reportKey, IN_SYNC));
        }
        const { survivors, whitelisted } = applyExceptions(drift, ref.rules ?? []);
        if (!inSync) {
          track(artifacts.putJson(reportKey, { iteration, drift, operations: survivors, whitelisted }));
        }
        track(artifacts.putJson(operationsKey, survivors), artifacts.putJson(whitelistedKey, whitelisted));
        await Promise.all(uploads);
        return {
          inSync,
          driftCount: drift.length,
          operationCount: survivors.length,
          whitelistedCount: whitelisted.length,
          groupCount: survivors.length === 0 ? 0 : groupDriftOperations(survivors, input.groupSize).length,
          planKey,
          reportKey,
          operationsKey,
          whitelistedKey,
          planned: !input.planKey,
          reinitialized,
        };
      } catch (err) {
        throw toActivityFailure(err);
      }
    },

    /**
     * Asks the model for every group's change of an iteration at once (at most `modelConcurrency`
     * requests in flight), all against the code the iteration starts from, and stores each group's
     * proposal for its cycle to commit without waiting for the model: each answer goes through fmt
     * as it comes, and is merged (`git merge-file`) onto the files as the groups before it leave
     * them, so a proposal holds every edited file's text before and after its cycle. A group whose
     * request failed, whose answer names a path outside the checkout, or whose change overlaps an
     * earlier group's has no proposal: its cycle asks the model itself, on the code as it is then.
     * Answers are stored as they come, so a retry asks only for those it lacks.
     */
    async proposeRemediations(input: ProposeInput): Promise<ProposeOutput> {
      const { ref, iteration } = input;
      const ws = await workspaces.get(ref);
      const h = hooks();
      await git.discardChanges(ws.dir, ['.terraform/', '.terraform.lock.hcl']);
      const [files, all, stored] = await Promise.all([
        readConfigFiles(ws.iacDir, ws.dir),
        getJson<DriftOperation[]>(artifacts, input.operationsKey),
        artifacts.list(key(ref, `iteration-${iteration}/`)),
      ]);
      const groups = groupDriftOperations(all, input.groupSize);
      const answerKey = (g: number) => key(ref, `iteration-${iteration}/group-${g}/answer.json`);
      const originals = new Map(files.map((f) => [f.path, f.content]));
      // The originals' syntax trees, held while the answers are formatted and merged (the root's
      // parse in prepareRound lingers: fmt's paragraphs are read from it, not parsed again).
      const config = TerraformConfig.of(files);
      const pathOf = new Map(files.map((f) => [f.content, posix.normalize(f.path)]));
      let holding = true;
      try {
        const inside = (path: string) => {
          try {
            confinedEditTarget(ws.dir, ws.iacDir, path);
            return true;
          } catch {
            return false;
          }
        };
        /** What fmt read for earlier answers (the originals' paragraphs are formatted once). */
        const fmtCache = newFmtCache(async (text) => {
          const path = pathOf.get(text);
          return path === undefined || !holding ? undefined : config.tree(path);
        });
        /** An answer's new texts through fmt as it comes, while the model works on the next group. */
        const format = (a: Remediation): Promise<void> =>
          keepCanonical(
            ws.engine,
            a.edits.map((e) => ({ edit: e, original: originals.get(e.path) })),
            fmtCache,
          );
        const limit = pLimit(deps.modelConcurrency ?? DEFAULT_MODEL_CONCURRENCY);
        let answered = 0;
        // The model's concurrency bounds the questions; formatting an answer takes no slot of it.
        const answers = groups.map(async (ops, g): Promise<Remediation | undefined> => {
          try {
            let r: Remediation;
            let store: Promise<unknown> = Promise.resolve();
            if (stored.includes(answerKey(g))) r = await getJson<Remediation>(artifacts, answerKey(g));
            else {
              r = await limit(() =>
                askModel(
                  ref,
                  ops,
                  files.map((f) => ({ ...f })),
                  all,
                ),
              );
              // Stored as the model gave it while its copy is formatted.
              store = artifacts.putJson(answerKey(g), r);
            }
            // A path outside the checkout: the cycle asks again, and refuses the answer then.
            if (!r.edits.every((e) => inside(e.path))) {
              await store;
              return undefined;
            }
            const formatted = { ...r, edits: r.edits.map((e) => ({ ...e })) };
            await Promise.all([store, format(formatted)]);
            return formatted;
          } catch (err) {
            log.warn('no proposal for a group: its cycle asks the model itself', {
              group: g + 1,
              error: err instanceof Error ? err.message : String(err),
            });
            return undefined;
          } finally {
            answered += 1;
            h.heartbeat(`${answered} of ${groups.length} groups' changes proposed`);
          }
        });
        // The files as the groups before each leave them (undefined: absent), each proposal merged on.
        const current = new Map<string, string | undefined>(originals);
        /**
         * Per file, the earlier proposals' edits as replacements of its original's paragraphs (null
         * once one was not one, or git merged it: git merges the next).
         */
        const replaced = new Map<string, Replacement[] | null>();
        /**
         * A group's edits on the files as they are now; undefined when one overlaps an earlier change.
         * An edit of paragraphs apart from the earlier edits' is made on the original with theirs;
         * otherwise git merges it (`merged`: fmt checks the result).
         */
        const mergeOnto = async (a: Remediation) => {
          const out: (Proposal['files'][number] & { merged: boolean; replaced: Replacement[] | null })[] = [];
          for (const e of a.edits) {
            const base = originals.get(e.path);
            const now = current.get(e.path);
            if (e.content === base) continue; // this group leaves the file as it was
            const mine =
              base !== undefined && e.path.endsWith('.tf')
                ? await replacementOf(base, e.content, fmtCache)
                : undefined;
            const earlier = replaced.get(e.path);
            const all = mine && earlier !== null ? [...(earlier ?? []), mine] : null;
            if (now === base) {
              out.push({ path: e.path, before: now ?? null, after: e.content, merged: false, replaced: all });
              continue;
            }
            if (base === undefined || now === undefined) return undefined;
            const spliced = all && applyReplacements(base, all);
            if (spliced) {
              out.push({ path: e.path, before: now, after: spliced, merged: false, replaced: all });
              continue;
            }
            const after = await git.mergeText(ws.scratch, now, base, e.content);
            if (after === undefined) return undefined;
            out.push({ path: e.path, before: now, after, merged: true, replaced: null });
          }
          return out;
        };
        // In group order, each as soon as its answer is in (the later answers still coming). Edits of
        // paragraphs an empty row apart keep what fmt made of each; two canonical texts git merged
        // where their changes do not touch stay canonical too — fmt checks it where the merged
        // changes' original was canonical (formatChanged), beside the next answers. From a group
        // whose merge fmt would change (or could not check), the cycles ask the model.
        const proposals: (Proposal | undefined)[] = [];
        const checks: Promise<number | undefined>[] = [];
        for (const [g, answer] of answers.entries()) {
          const a = await answer;
          const out = a && (await mergeOnto(a));
          if (!a || !out) {
            proposals.push(undefined);
            continue;
          }
          for (const f of out) {
            current.set(f.path, f.after);
            replaced.set(f.path, f.replaced);
          }
          const toCheck = out.filter((f) => f.merged);
          if (toCheck.length > 0)
            checks.push(
              formatChanged(
                ws.engine,
                toCheck.map((f) => ({
                  original: originals.get(f.path) as string,
                  text: f.after,
                  tfvars: f.path.endsWith('.tfvars'),
                })),
                fmtCache,
              ).then(
                (checked) =>
                  checked.some((c, i) => c.canonical && c.formatted !== toCheck[i]?.after) ? g : undefined,
                () => g,
              ),
            );
          proposals.push({
            files: out.map(({ merged: _m, replaced: _r, ...file }) => file),
            unremediable: a.unremediable,
          });
        }
        const off = (await Promise.all(checks)).filter((g) => g !== undefined);
        const firstOff = off.length > 0 ? Math.min(...off) : undefined;
        const proposed = proposals.flatMap((p, g) =>
          p && (firstOff === undefined || g < firstOff) ? [{ g, p }] : [],
        );
        await Promise.all(proposed.map(({ g, p }) => artifacts.putJson(proposalKey(ref, iteration, g), p)));
        return { proposed: proposed.map(({ g }) => g) };
      } finally {
        holding = false;
        config.dispose();
      }
    },

    /** One generate cycle: the model's changes for one group, written, committed and pushed. */
    async generateRemediation(input: CycleInput): Promise<GenerateOutput> {
      const ws = await workspaces.get(input.ref);
      // An attempt that failed after writing the model's edits but before committing them left
      // them in the checkout: the model would read the fixed code, answer "no change", and the
      // cycle would be lost. Every attempt starts from the branch's last commit.
      await git.discardChanges(ws.dir, ['.terraform/', '.terraform.lock.hcl']);
      const operations = handled(getJson<DriftOperation[]>(artifacts, input.operationsKey));
      const cycle = await commitCycle(ws, input, operations);
      return (await pushCycles(ws, input.ref, [cycle]))[0] as GenerateOutput;
    },

    /**
     * The proposed changes of consecutive groups (proposeRemediations), each committed as its
     * group's cycle would (asking the model where a proposal no longer fits), pushed once. Every
     * answer is stored before the first commit (storeProposedAnswers).
     */
    async commitProposals(input: CommitProposalsInput): Promise<GenerateOutput[]> {
      const ws = await workspaces.get(input.ref);
      await git.discardChanges(ws.dir, ['.terraform/', '.terraform.lock.hcl']);
      const operations = handled(getJson<DriftOperation[]>(artifacts, input.operationsKey));
      const h = hooks();
      const { groups, ...rest } = input;
      // Every proposal, and every cycle's commit an earlier attempt made, looked up at once.
      const proposals = new Map(
        groups.map((g) => [
          g,
          handled(getJson<Proposal>(artifacts, proposalKey(input.ref, input.iteration, g))),
        ]),
      );
      const markers = new Map(groups.map((g) => [g, cycleMarker(input.ref, input.iteration, g)]));
      const committed = await git.commitsByMarker(ws.dir, [...markers.values()]);
      const stored = await storeProposedAnswers(
        ws,
        input,
        groups.filter((g) => !committed.has(markers.get(g) ?? '')),
        proposals,
      );
      const cycles: CommittedCycle[] = [];
      for (const group of groups) {
        const found = committed.get(markers.get(group) ?? '');
        cycles.push(
          await commitCycle(ws, { ...rest, group, proposal: true }, operations, {
            found,
            proposal: proposals.get(group),
            stored,
          }),
        );
        h.heartbeat(`${cycles.length} of ${input.groups.length} proposed changes committed`);
      }
      return pushCycles(ws, input.ref, cycles);
    },

    /**
     * Validates the cycle's code with the engine: plan -out on the targets, which validates the
     * whole configuration first (`validate -json` runs when it fails, for its diagnostic).
     */
    async validateRemediation(input: CycleInput): Promise<ValidateOutput> {
      if (input.commit) return validateAt(input, input.commit);
      const { ref, iteration, group } = input;
      const ws = await workspaces.get(ref);
      const resultKey = resultKeyOf(ref, iteration, group);
      // The cycle's commit and a revert of it, from one `git log`: commits whose message names
      // the cycle or reverts something, newest first, as `sha NUL message NUL`.
      const marker = cycleMarker(ref, iteration, group);
      const logged = (
        await git.run(
          ['log', '-F', `--grep=${marker}`, '--grep=This reverts commit ', '--format=%H%x00%B%x00'],
          ws.dir,
        )
      ).split('\0');
      const messages: { sha: string; body: string }[] = [];
      for (let i = 0; i + 1 < logged.length; i += 2)
        messages.push({ sha: (logged[i] ?? '').trim(), body: logged[i + 1] ?? '' });
      const cycleCommit = messages.find((m) => hasMarkerLine(m.body, marker))?.sha ?? '';
      const reverted =
        cycleCommit !== '' && messages.some((m) => m.body.includes(`This reverts commit ${cycleCommit}`));
      if (reverted) {
        // A retry after this cycle's change was found invalid and reverted: validating the reverted
        // tree would call the cycle valid. The answer was recorded before the revert.
        const recorded = await getJson<CycleResult>(artifacts, resultKey);
        await ws.git.push(ws.dir, ref.branch);
        return {
          valid: false,
          reinitialized: false,
          reason: recorded.validation_failure ?? 'The proposed change did not validate; it was reverted.',
          head: (await git.run(['rev-parse', 'HEAD'], ws.dir)).trim(),
        };
      }
      try {
        return await planCycle(ws, input);
      } catch (err) {
        if (err instanceof EngineError && err.permanent) {
          // The proposed code does not validate: say why its drift stays unreconciled (recorded
          // first, so a retry after the revert finds it), then take the cycle's commit back so the
          // branch stays valid.
          await recordTakenBack(input, group, err.message, notValid(err.message));
          await git.run(['revert', '--no-edit', cycleCommit || 'HEAD'], ws.dir);
          await ws.git.push(ws.dir, ref.branch);
          const head = (await git.run(['rev-parse', 'HEAD'], ws.dir)).trim();
          return { valid: false, reinitialized: false, reason: err.message, head };
        }
        throw toActivityFailure(err);
      }
    },

    /**
     * After an iteration whose groups were validated while later ones generated on top of them:
     * takes back the changes whose targeted plans failed, in one commit, and pushes. A change that
     * does not revert apart from a later group's (that group edited the same lines since) is taken
     * back with every group after it, those groups' drift left with the reason. A retry after the
     * step committed finds its commit and pushes it again.
     */
    async takeBackGroups(input: TakeBackInput): Promise<TakeBackOutput> {
      const { ref, iteration } = input;
      const ws = await workspaces.get(ref);
      const marker = `Kumoss-TakeBack: ${ref.sessionId}/${ref.roundId}/${iteration}`;
      const recordKey = key(ref, `iteration-${iteration}/take-back.json`);
      const head = async () => (await git.run(['rev-parse', 'HEAD'], ws.dir)).trim();
      const stepped = (await git.commitsByMarker(ws.dir, [marker])).has(marker);
      if (stepped) {
        const found = await getJson<{ takenBack: number[] }>(artifacts, recordKey);
        await ws.git.push(ws.dir, ref.branch);
        return { head: await head(), takenBack: found.takenBack };
      }
      // An attempt that failed halfway left its revert in the checkout: start from the branch.
      const fromBranch = async () => {
        await git.run(['revert', '--quit'], ws.dir).catch(() => undefined);
        await git.discardChanges(ws.dir, ['.terraform/', '.terraform.lock.hcl']);
      };
      await fromBranch();
      const invalid = new Set(input.invalid);
      const revert = (groups: { commit: string }[]) =>
        git.run(['revert', '--no-commit', ...groups.map((g) => g.commit).reverse()], ws.dir);
      let takenBack = input.groups.filter((g) => invalid.has(g.group));
      try {
        await revert(takenBack);
      } catch (err) {
        if (!(err instanceof GitError)) throw err;
        await fromBranch();
        // Every group from the first invalid one on: the newest first, each reverts cleanly.
        takenBack = input.groups.slice(input.groups.findIndex((g) => invalid.has(g.group)));
        const reason = 'it did not revert apart from an earlier change that did not validate';
        for (const g of takenBack.filter((t) => !invalid.has(t.group)))
          await recordTakenBack(input, g.group, reason, `The proposed change was taken back: ${reason}.`);
        await revert(takenBack);
      }
      const record = { takenBack: takenBack.map((g) => g.group) };
      await artifacts.putJson(recordKey, record);
      const names = `group${record.takenBack.length > 1 ? 's' : ''} ${record.takenBack.map((g) => g + 1).join(', ')}`;
      await git.run(
        [
          'commit',
          '--quiet',
          '-m',
          `Take back iteration ${iteration}'s changes that did not validate (${names})\n\n${marker}`,
        ],
        ws.dir,
      );
      await ws.git.push(ws.dir, ref.branch);
      return { head: await head(), ...record };
    },

    /**
     * The whole root's plan after an iteration whose earlier groups were validated by targeted
     * plans: one plan (which validates the configuration) of the branch with every group on it.
     * When it does not plan, the groups no targeted plan validated (`unplanned`: the last, the
     * proposed ones, and those left to the whole root) are first planned at their own commits (each
     * without the earlier ones that failed); those that fail are taken back
     * in one commit and the whole root planned again. When the whole
     * root does not plan although each group's targeted plan did — a change broke something outside
     * its group's addresses — the targeted plans are not trusted: the groups' commits are taken back
     * in one revert and applied again one by one, each validated by a plan of the whole root, and
     * those that do not plan stay off the branch with the reason in their cycle's result. The branch
     * is pushed once, at the end; a retry after that push finds the step's commit and plans again.
     */
    async confirmIteration(input: ConfirmInput): Promise<ConfirmOutput> {
      const { ref, iteration } = input;
      const ws = await workspaces.get(ref);
      const h = hooks();
      const step = `iteration-${iteration}/confirm`;
      const recordKey = key(ref, `${step}/confirm.json`);
      const marker = `Kumoss-Confirm: ${ref.sessionId}/${ref.roundId}/${iteration}`;
      const head = async () => (await git.run(['rev-parse', 'HEAD'], ws.dir)).trim();
      const rootPlan = async (name: string) => {
        const planFile = join(ws.scratch, `${ref.roundId}-${iteration}-${name}.tfplan`);
        const plan = await ws.engine.planValidated({ out: planFile, targets: input.targets }, h);
        const planKey = key(ref, `${step}/${name}.tfplan`);
        await Promise.all([
          artifacts.putFile(planKey, planFile),
          artifacts.putText(key(ref, `${step}/${name}.txt`), plan.output),
        ]);
        return { planKey, planClean: !plan.hasChanges, reinitialized: plan.reinitialized };
      };
      /**
       * The step's outcome after the whole root refused at first: recorded (confirm.json), the
       * branch pushed once, the plan of the whole root that was kept (if one was) the answer.
       */
      const finish = async (
        reverted: number[],
        kept: Awaited<ReturnType<typeof rootPlan>> | undefined,
        disagreement?: string,
      ): Promise<ConfirmOutput> => {
        const record: ConfirmRecord = {
          ...(disagreement === undefined ? {} : { disagreement }),
          reverted,
          ...(kept ? { planKey: kept.planKey, planClean: kept.planClean } : {}),
        };
        await artifacts.putJson(recordKey, record);
        await ws.git.push(ws.dir, ref.branch);
        return { ...(kept ?? { reinitialized: false }), ...record, head: await head(), recordKey };
      };
      /** The engine's answer when the root does not plan; any other failure is thrown. */
      const refusal = (err: unknown): string => {
        if (err instanceof EngineError) return err.message;
        throw err;
      };
      const stepped = (await git.commitsByMarker(ws.dir, [marker])).has(marker);
      if (stepped) {
        // A retry after the whole-root validation pushed: what it found is recorded.
        const found = await getJson<ConfirmRecord>(artifacts, recordKey);
        return { ...found, reinitialized: false, head: await head(), recordKey };
      }
      let disagreement: string;
      try {
        return { ...(await rootPlan('plan')), head: await head(), reverted: [] };
      } catch (err) {
        disagreement = refusal(err);
      }
      let groups = input.groups;
      /** Groups taken back because they did not plan on their own (below), before any fallback. */
      const ownFailures: number[] = [];
      const unplanned = groups.filter((g) => input.unplanned?.includes(g.group));
      if (unplanned.length > 0) {
        // Changes no plan has validated on their own (the iteration's last, those whose next group's
        // change was proposed, and the groups left to the whole root once generation ended): each
        // planned at its own commit, as a targeted plan would have — without the earlier ones that
        // failed so — before anything is taken back on the whole root's word.
        const failed: { group: number; commit: string; reason: string }[] = [];
        for (const g of unplanned) {
          const own = await validateAt(
            {
              ref,
              iteration,
              group: g.group,
              operationsKey: input.operationsKey,
              groupSize: input.groupSize,
              targets: input.targets,
              scope: 'group',
              commit: g.commit,
            },
            g.commit,
            // Apart from the changes before it that did not plan: it stands or falls on its own.
            { record: false, without: failed.map((f) => f.commit) },
          );
          if (!own.valid) failed.push({ ...g, reason: own.reason ?? 'it did not plan' });
        }
        if (failed.length > 0) {
          const before = await head();
          let takenBack = true;
          try {
            await git.run(['revert', '--no-commit', ...failed.map((f) => f.commit).reverse()], ws.dir);
            await git.run(
              [
                'commit',
                '--quiet',
                '-m',
                `Take back iteration ${iteration}'s changes that do not plan on their own\n\n${failed.map((f) => `Group ${f.group + 1}: ${f.reason}`).join('\n')}\n\n${marker}`,
              ],
              ws.dir,
            );
          } catch {
            // A later group edited the same lines: they do not revert apart — the fallback below
            // validates every group against the whole root instead.
            await git.run(['revert', '--abort'], ws.dir).catch(() => undefined);
            await git.run(['reset', '--hard', before], ws.dir);
            takenBack = false;
          }
          if (takenBack) {
            for (const f of failed) {
              ownFailures.push(f.group);
              await recordTakenBack(input, f.group, f.reason, notValid(f.reason));
            }
            groups = groups.filter((g) => !ownFailures.includes(g.group));
            let planned: Awaited<ReturnType<typeof rootPlan>> | undefined;
            try {
              planned = groups.length > 0 ? await rootPlan('plan-after-take-back') : undefined;
            } catch (err) {
              disagreement = refusal(err);
            }
            if (planned || groups.length === 0) return finish(ownFailures, planned);
          }
        }
      }
      const before = await head();
      const commits = groups.map((g) => g.commit);
      await git.run(['revert', '--no-commit', ...[...commits].reverse()], ws.dir);
      await git.run(
        [
          'commit',
          '--quiet',
          '-m',
          `Take back iteration ${iteration}'s changes to validate each against the whole root\n\nEach group planned on its own (-target), the whole root with all of them did not: ${disagreement}\n\n${marker}`,
        ],
        ws.dir,
      );
      // The iteration began on a root that planned. When it does not plan without the changes
      // either, the failure is not theirs (the cloud, the network, the lock): the step is retried
      // from the branch as it was, nothing pushed.
      try {
        await rootPlan('base');
      } catch (err) {
        await git.run(['reset', '--hard', before], ws.dir);
        throw toActivityFailure(err);
      }
      let last: Awaited<ReturnType<typeof rootPlan>> | undefined;
      const reverted: number[] = [...ownFailures];
      for (const { group, commit } of groups) {
        let reason: string;
        try {
          await git.run(['cherry-pick', commit], ws.dir);
        } catch {
          await git.run(['cherry-pick', '--abort'], ws.dir).catch(() => undefined);
          reason = 'it no longer applies without the changes taken back before it';
          reverted.push(group);
          await recordTakenBack(input, group, reason, `The proposed change was taken back: ${reason}.`);
          continue;
        }
        try {
          last = await rootPlan(`group-${group}`);
          continue;
        } catch (err) {
          reason = refusal(err);
        }
        await git.run(['reset', '--hard', 'HEAD~1'], ws.dir);
        reverted.push(group);
        await recordTakenBack(
          input,
          group,
          reason,
          `The proposed change planned on its own but not with the whole root (${reason}); it was reverted.`,
        );
      }
      return finish(reverted, last, disagreement);
    },

    /** The drift JSON report: diff_history first, then the leftovers of the round. */
    async writeReport(input: ReportInput): Promise<ReportOutput> {
      const { ref } = input;
      const ws = await workspaces.get(ref);
      // Everything the report reads, side by side: git's history and the round's artifacts.
      const [history, cycleResults, leftover, whitelisted, changedThisRound] = await Promise.all([
        diffHistory(git, ws.dir, input.baseCommit, ref.iacPath),
        Promise.all(
          input.cycleResultKeys.map((k) => getJson<{ unremediable?: Unremediable[] }>(artifacts, k)),
        ),
        input.finalOperationsKey
          ? getJson<DriftOperation[]>(artifacts, input.finalOperationsKey)
          : Promise.resolve([]),
        input.whitelistedKey
          ? getJson<WhitelistedException[]>(artifacts, input.whitelistedKey)
          : Promise.resolve([]),
        git
          .run(
            [
              'log',
              '--format=%H',
              '-F',
              `--grep=Kumoss-Cycle: ${ref.sessionId}/${ref.roundId}/`,
              `${input.baseCommit}..HEAD`,
            ],
            ws.dir,
          )
          .then((out) => out.trim() !== ''),
      ]);
      const remediated = [...history.resources.entries()]
        .map(([address, files]) => ({ address, files: [...files].sort() }))
        .sort((a, b) => a.address.localeCompare(b.address));
      const reasons = new Map<string, Unremediable>();
      for (const r of cycleResults) for (const u of r.unremediable ?? []) reasons.set(u.address, u);
      const unreconciled: UnreconciledDrift[] = leftover.map((op) => ({
        address: op.address,
        attributes: op.changes.map((c) => c.path || '*'),
        reason:
          reasons.get(op.address)?.reason ??
          `Still drifted after ${input.iterations} iteration(s) (orchestration.max_drift_reports).`,
      }));
      const outcome = computeOutcome(remediated.length, unreconciled.length);
      const summary = await model.summarize({
        mode: input.mode,
        request: input.text,
        remediated: remediated.map((r) => r.address),
        unreconciled: unreconciled,
        whitelisted: whitelisted.map((w) => ({ address: w.address, rule_id: w.rule_id })),
        outcome,
      });
      const report: DriftReport = driftReportSchema.parse({
        session_id: ref.sessionId,
        round_id: ref.roundId,
        mode: input.mode,
        summary,
        outcome,
        remediated_resources: remediated,
        ...(unreconciled.length > 0 ? { unreconciled_drift: unreconciled } : {}),
        ...(whitelisted.length > 0 ? { whitelisted_exceptions: whitelisted } : {}),
        iterations: input.iterations,
        branch: ref.branch,
        commit: history.head,
      });
      const reportKey = key(ref, 'drift-report.json');
      await artifacts.putJson(reportKey, report);
      workspaces.release(ref);
      return {
        reportKey,
        outcome,
        summary,
        remediated: remediated.map((r) => r.address),
        unreconciledCount: unreconciled.length,
        whitelistedCount: whitelisted.length,
        changed: changedThisRound,
      };
    },
  };
}

export type DriftRoundActivities = ReturnType<typeof createDriftRoundActivities>;
