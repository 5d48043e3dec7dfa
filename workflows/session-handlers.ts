// The session's operations, one handler per kind: merge, pull request, apply, generate (and revert,
// a generate round with no change to the code) and drift (partial, full). The session workflow
// (workflows/session.ts) admits an operation, records its round, and hands it here; a handler runs
// it — a child workflow for a round, activities for a pull request or a merge — and fills in the
// round's outcome. What it changes about the pinned plan and its lock, and the events it adds, it
// returns; the session writes them with the round's end.
import { CancellationScope, executeChild, isCancellation, log, proxyActivities } from '@temporalio/workflow';
import {
  NO_PINNED_PLAN,
  planLockReason,
  type DriftRoundInput,
  type DriftRoundResult,
  type GenerateRoundResult,
  type PinnedPlan,
} from '../shared/workflow-inputs';
import type {
  ApplyRoundResult,
  OperationKind,
  SessionOperation,
  SessionRound,
  SessionState,
} from '../shared/contracts';
import type { SessionEventInput } from '../shared/infra/db/sessions';
import { APPLY_REFUSALS, innermostFailure } from '../shared/errors';
import { applyRoundWorkflowId, driftRoundWorkflowId, generateRoundWorkflowId } from '../shared/ids';
import { driftRoundSearchAttributes } from '../shared/search-attributes';
import type { Activities } from '../activities';
import { applyRound } from './apply-round';
import { driftRound } from './drift-round';
import { generateRound } from './generate-round';
import { failureLogKey } from './round-recorder';

const git = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

/** One operation of a session: its round (filled in by the handler) and the session's state. */
export interface OperationContext {
  id: string;
  state: SessionState;
  op: SessionOperation;
  round: SessionRound;
}

export interface OperationOutcome {
  /** Events to record with the round's end (a pull request's). */
  events: SessionEventInput[];
  /** What the operation changes about the pinned plan and its lock. */
  planChange?: {
    pinned: SessionState['pinned'];
    lock: { reason: string; locked_by: string | null } | null;
  };
}

/** The innermost cause says what went wrong (ChildWorkflowFailure → ApplicationFailure). */
function failureReason(err: unknown): string {
  return innermostFailure(err).message;
}

/** A pull request or merge that failed: the round says why; the session goes on. */
function stepFailed(round: SessionRound, err: unknown): void {
  if (isCancellation(err)) throw err;
  round.status = 'failed';
  round.failure_reason = failureReason(err);
}

/**
 * A round child that failed fails the session, as the seed says; a session being cancelled itself
 * ends cancelled.
 */
function roundFailed(state: SessionState, round: SessionRound, err: unknown): void {
  if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
  round.status = 'failed';
  round.failure_reason = isCancellation(err) ? `The round was cancelled.` : failureReason(err);
  state.status = 'FAILED';
}

/** What every round child of the session is given: where it works and how long its steps may be silent. */
function roundSettings(state: SessionState, op: SessionOperation) {
  return {
    session_id: state.session_id,
    round_id: op.round_id,
    repository_url: state.repository_url,
    cloud: state.cloud,
    scope_id: state.scope_id,
    iac_path: state.iac_path,
    state_project_id: state.state_project_id,
    branch: state.branch,
    ...(state.activity_heartbeat_seconds
      ? { heartbeat_timeout_seconds: state.activity_heartbeat_seconds }
      : {}),
  };
}

/** Merge: the pull request (or the session branch) merges, unless the session is locked; a drift session ends there. */
async function merge(ctx: OperationContext): Promise<OperationOutcome> {
  const { id, state, op, round } = ctx;
  const outcome: OperationOutcome = { events: [] };
  // A drift session ends at the merge of its pull request.
  try {
    const lock = await git.sessionLock({ sessionId: id });
    if (lock.locked) {
      round.status = 'failed';
      round.failure_reason =
        'kind' in lock && lock.kind === 'plan'
          ? `Session ${id} is locked: ${lock.reason}`
          : `Session ${id} is locked; merging is blocked until an admin clears the lock.`;
    } else {
      const message = op.text ?? `Merge ${state.branch}`;
      const pr = state.pull_request ?? op.pull_request;
      const onForge =
        pr !== undefined &&
        pr !== null &&
        pr.provider !== 'git_host' &&
        pr.provider !== 'local' &&
        pr.number !== null;
      const merged = onForge
        ? await git.mergePullRequest({
            sessionId: id,
            provider: pr.provider as 'github' | 'gitlab' | 'gitea',
            repositoryUrl: state.repository_url,
            number: pr.number as number,
            message,
          })
        : await git.mergeSessionBranch({
            sessionId: id,
            repositoryUrl: state.repository_url,
            head: state.branch,
            message,
            ...(state.pull_request ? { base: state.pull_request.base } : {}),
          });
      await git.recordPullRequestMerged({ sessionId: id, commit: merged.commit });
      round.status = 'completed';
      round.commit = merged.commit;
      state.status = 'MERGED';
    }
  } catch (err) {
    stepFailed(round, err);
  }
  return outcome;
}

/** Pull request: opened from the session branch (or the one already open adopted), its title written by the model. */
async function pullRequest(ctx: OperationContext): Promise<OperationOutcome> {
  const { id, state, op, round } = ctx;
  const outcome: OperationOutcome = { events: [] };
  try {
    const target = { sessionId: id, repositoryUrl: state.repository_url, head: state.branch };
    const { facts, existing } = await git.pullRequestFacts(target);
    const pr =
      existing ??
      (await git.openPullRequest({
        ...target,
        base: facts.base,
        text: await git.writePullRequestText(facts),
      }));
    state.pull_request = {
      provider: pr.provider === 'local' ? 'git_host' : pr.provider,
      number: pr.number,
      base: pr.base,
    };
    round.status = 'completed';
    round.summary = pr.title;
    outcome.events.push({
      source_key: `${op.round_id}:pull_request`,
      round_id: op.round_id,
      type: 'pull_request',
      data: { round_id: op.round_id, ...pr },
    });
  } catch (err) {
    stepFailed(round, err);
  }
  return outcome;
}

/**
 * Why an apply of `pinned` may not run under four eyes, or undefined when it may: the approval the
 * operation carries must name this very plan (a plan pinned after the approval is unapproved) and
 * come from someone else than who pinned it, whatever lock is held.
 */
export function approvalProblem(pinned: PinnedPlan, op: SessionOperation): string | undefined {
  const approval = op.approval;
  if (!approval)
    return 'Applying needs a second devops or admin to approve the pinned plan first; nothing was applied.';
  if (approval.sha256 !== pinned.sha256)
    return (
      `The pinned plan (${pinned.sha256.slice(0, 12)}) is not the plan that was approved (${approval.sha256.slice(0, 12)}): ` +
      'a later generate round pinned it. Nothing was applied; a second devops or admin approves the plan pinned now.'
    );
  if (pinned.pinned_by && approval.by === pinned.pinned_by)
    return 'The approval is by the person who pinned the plan; another devops or admin approves it. Nothing was applied.';
  return undefined;
}

/** Apply: exactly the pinned plan, in its own round; a refused plan (stale, denied) leaves the session going. */
async function apply(ctx: OperationContext): Promise<OperationOutcome> {
  const { id, state, op, round } = ctx;
  const outcome: OperationOutcome = { events: [] };
  // Only a generate round pins a plan; drift rounds never do.
  const pinned = state.pinned;
  const unapproved = pinned && state.apply_requires_approval ? approvalProblem(pinned, op) : undefined;
  if (!state.pinned_plan || !pinned) {
    round.status = 'failed';
    round.failure_reason = NO_PINNED_PLAN;
    state.status = 'FAILED';
    log.warn(`Session ${id}: ${NO_PINNED_PLAN}`);
  } else if (unapproved) {
    // Refused where the plan is applied: nothing ran, the plan stays pinned for its approval.
    round.status = 'uncompleted';
    round.reason = unapproved;
    log.warn(`Session ${id}: ${unapproved}`);
  } else {
    try {
      const result: ApplyRoundResult = await executeChild(applyRound, {
        workflowId: applyRoundWorkflowId(id, op.round_id),
        args: [
          {
            ...roundSettings(state, op),
            pinned,
          },
        ],
        staticSummary: `Apply round ${op.round_id} of session ${id} (plan of ${pinned.round_id})`,
      });
      round.status = 'completed';
      round.summary = result.summary;
      round.report_key = result.log_key;
      // Applied: nothing is pinned any more, and the plan's lock goes.
      state.pinned_plan = null;
      state.pinned = null;
      outcome.planChange = { pinned: null, lock: null };
    } catch (err) {
      if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
      const reason = isCancellation(err) ? 'The round was cancelled.' : failureReason(err);
      const type = innermostFailure(err).type;
      if (type !== undefined && APPLY_REFUSALS.includes(type)) {
        // Refused, not failed: nothing was applied, and a new generate round can pin a fresh plan.
        round.status = 'uncompleted';
        round.reason = reason;
      } else {
        round.status = 'failed';
        round.failure_reason = reason;
        // The apply log of a failed apply: what the engine said.
        const logKey = failureLogKey(err);
        if (logKey) round.report_key = logKey;
        state.status = 'FAILED';
      }
    }
  }
  return outcome;
}

/** Generate (and revert, a generate round with no change to the code): pins a plan and locks the session. */
async function generate(ctx: OperationContext): Promise<OperationOutcome> {
  const { id, state, op, round } = ctx;
  const outcome: OperationOutcome = { events: [] };
  try {
    const result: GenerateRoundResult = await executeChild(generateRound, {
      workflowId: generateRoundWorkflowId(id, op.round_id),
      args: [
        {
          ...roundSettings(state, op),
          text: op.text ?? '',
          ...(op.revert?.length ? { revert: op.revert } : {}),
          ...(state.max_repair_cycles !== undefined ? { max_repair_cycles: state.max_repair_cycles } : {}),
        },
      ],
      memo: {
        request: {
          mode: 'generate',
          text: op.text ?? '',
          actor_uuid: op.actor_uuid ?? null,
          ...(op.revert?.length ? { revert: op.revert } : {}),
        },
      },
      staticSummary: `${op.revert?.length ? 'Revert (generate) round' : 'Generate round'} ${op.round_id} of session ${id}`,
    });
    round.status = result.status;
    if (result.summary) round.summary = result.summary;
    if (result.report_key) round.report_key = result.report_key;
    if (result.reason) round.reason = result.reason;
    if (result.pinned_plan) {
      // The new plan replaces any earlier one; the session is locked until it is applied.
      const pinned = { ...result.pinned_plan, pinned_by: op.actor_uuid ?? null };
      state.pinned_plan = pinned.key;
      state.pinned = pinned;
      // A revert changes no code: nothing for a pull request to propose.
      if (!op.revert?.length) state.has_changes = true;
      outcome.planChange = {
        pinned,
        lock: { reason: planLockReason(op.round_id), locked_by: op.actor_uuid ?? null },
      };
    }
  } catch (err) {
    roundFailed(state, round, err);
  }
  return outcome;
}

/** A partial or full drift round. */
async function drift(ctx: OperationContext): Promise<OperationOutcome> {
  const { id, state, op, round } = ctx;
  const outcome: OperationOutcome = { events: [] };
  const workflowId = driftRoundWorkflowId(id, op.round_id);
  const roundInput: DriftRoundInput = {
    session_id: id,
    round_id: op.round_id,
    mode: op.kind === 'full' ? 'full' : 'partial',
    repository_url: state.repository_url,
    cloud: state.cloud,
    scope_id: state.scope_id,
    iac_path: state.iac_path,
    state_project_id: state.state_project_id,
    text: op.text ?? '',
    ...(op.targets?.length ? { targets: op.targets } : {}),
    branch: state.branch,
    max_drift_reports: state.max_drift_reports,
    drift_group_operations: state.drift_group_operations,
    ...(state.activity_heartbeat_seconds
      ? { heartbeat_timeout_seconds: state.activity_heartbeat_seconds }
      : {}),
  };
  try {
    const result: DriftRoundResult = await executeChild(driftRound, {
      workflowId,
      args: [roundInput],
      // Found with `temporal workflow list --query "KumossSessionId='…'"`; the request is in the memo.
      typedSearchAttributes: driftRoundSearchAttributes(roundInput),
      memo: { request: { mode: op.kind, text: op.text ?? '', actor_uuid: op.actor_uuid ?? null } },
      staticSummary: `${op.kind === 'partial' ? 'Partial' : 'Full'} drift round ${op.round_id} of session ${id}`,
    });
    round.status = result.status;
    if (result.outcome) round.outcome = result.outcome;
    if (result.summary) round.summary = result.summary;
    if (result.report_key) round.report_key = result.report_key;
    if (result.reason) round.reason = result.reason;
    if (result.status === 'completed') state.has_changes = true;
  } catch (err) {
    roundFailed(state, round, err);
  }
  return outcome;
}

/** The handler of each operation kind. */
export const OPERATION_HANDLERS: Record<OperationKind, (ctx: OperationContext) => Promise<OperationOutcome>> =
  {
    merge,
    pull_request: pullRequest,
    apply,
    generate,
    partial: drift,
    full: drift,
  };
