// The session workflow: one per session (workflow id `session:<id>`), serialising its operations.
// Operations arrive as Updates (update-with-start for the first): the validator refuses one while
// another is in flight or once the session is finished, so a refused operation never starts,
// costs no history, and the caller learns it at once. Rounds run as child workflows; pull requests
// are opened and merged here, never inside an API request. The session's status, rounds and
// events are written to the metadata store as they happen (activities/session-store.ts), so the
// workflow keeps only what it needs, and a MERGED or FAILED session's workflow completes.
//
// Versioning: sessions started before the session store have no `session-store` patch marker in
// their history and go on exactly as they ran (rounds kept in the workflow state, operations as
// signals); a new run writes the marker and takes the new path. When no running session lacks the
// marker any more, the old path goes (deprecatePatch, then remove). README "Shipping a workflow change".
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  NO_PINNED_PLAN,
  planLockReason,
  SessionRefusals,
  sessionBusyMessage,
  sessionFinishedMessage,
  type ApplyRoundResult,
  type DriftRoundInput,
  type DriftRoundResult,
  type GenerateRoundResult,
  type SessionOperation,
  type SessionRound,
  type SessionSettings,
  type SessionState,
} from '../shared/contracts';
import type { SessionEventInput } from '../shared/db/sessions';
import { applyRoundWorkflowId, driftRoundWorkflowId, generateRoundWorkflowId } from '../shared/ids';
import { driftRoundSearchAttributes } from '../shared/search-attributes';
import type { Activities } from '../activities';
import { applyRound } from './apply-round';
import { failureLogKey } from './round-recorder';
import { driftRound } from './drift-round';
import { generateRound } from './generate-round';
import { operationSignal, operationUpdate, sessionQuery } from '../shared/messages';
import { APPLY_REFUSALS, ErrorTypes, innermostFailure } from '../shared/errors';

/** The patch that moved session state, rounds and events into the metadata store. */
export const SESSION_STORE_PATCH = 'session-store';

const git = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

/** Metadata-store writes: short, retried until the store answers (a session waits for it). */
const store = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export { operationSignal, operationUpdate, sessionQuery };

export type SessionInput = {
  settings: SessionSettings;
  state?: SessionState;
  /** The first operation, for a session started by another workflow (a stack's auto-remediation). */
  first?: SessionOperation;
};

export function initialState(settings: SessionSettings): SessionState {
  return {
    ...settings,
    status: 'ACTIVE',
    pinned_plan: null,
    in_flight: null,
    round_count: 0,
    has_changes: false,
    pull_request: null,
  };
}

/** The innermost cause says what went wrong (ChildWorkflowFailure → ApplicationFailure). */
function failureReason(err: unknown): string {
  return innermostFailure(err).message;
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

const NOTHING_TO_PROPOSE =
  'The session branch has no changes yet: no round of this session completed with changes.';

function roundEndEvent(round: SessionRound, state: SessionState): SessionEventInput {
  return {
    source_key: `${round.round_id}:end`,
    round_id: round.round_id,
    type: 'round_end',
    data: {
      round_id: round.round_id,
      status: round.status,
      session_status: state.status,
      ...(round.outcome ? { outcome: round.outcome } : {}),
      ...(round.failure_reason ? { failure_reason: round.failure_reason } : {}),
      ...(round.reason ? { reason: round.reason } : {}),
    },
  };
}

export async function session(input: SessionInput): Promise<SessionState> {
  const carried = input.state;
  const state: SessionState = carried
    ? {
        ...carried,
        round_count: carried.round_count ?? carried.rounds?.length ?? 0,
        has_changes:
          carried.has_changes ??
          (carried.rounds ?? []).some(
            (r) => (r.kind === 'partial' || r.kind === 'full') && r.status === 'completed',
          ),
        pull_request: carried.pull_request ?? null,
      }
    : initialState(input.settings);
  const id = state.session_id;
  const stored = patched(SESSION_STORE_PATCH);
  if (!stored) state.rounds ??= [];
  let pending: SessionOperation | undefined;

  const refusal = (op: SessionOperation): { type: string; message: string } | undefined => {
    if (state.status !== 'ACTIVE')
      return { type: SessionRefusals.Finished, message: sessionFinishedMessage(id) };
    if (state.in_flight || pending) return { type: SessionRefusals.Busy, message: sessionBusyMessage(id) };
    if (stored && op.kind === 'pull_request' && !state.has_changes) {
      return { type: SessionRefusals.NothingToPropose, message: NOTHING_TO_PROPOSE };
    }
    if (stored && op.kind === 'merge' && !state.pull_request && !op.pull_request) {
      return {
        type: SessionRefusals.NothingToPropose,
        message: 'Create the pull request before merging it.',
      };
    }
    return undefined;
  };
  const admit = (op: SessionOperation): void => {
    pending = op;
    state.in_flight = { round_id: op.round_id, kind: op.kind };
  };

  setHandler(sessionQuery, () => state);
  // Sessions started before the Update still receive operations this way.
  setHandler(operationSignal, (op) => {
    const no = refusal(op);
    if (no) {
      log.warn(no.message, { round_id: op.round_id });
      return;
    }
    if (state.rounds?.some((r) => r.round_id === op.round_id)) return; // a redelivered request
    admit(op);
  });
  setHandler(
    operationUpdate,
    (op) => {
      admit(op);
      return { accepted: true as const, round_id: op.round_id };
    },
    {
      validator: (op: SessionOperation) => {
        const no = refusal(op);
        if (no) {
          log.warn(no.message, { round_id: op.round_id });
          throw ApplicationFailure.nonRetryable(no.message, no.type);
        }
      },
    },
  );

  const describe = (): void =>
    setCurrentDetails(
      `${state.status} · ${state.round_count} round(s)${state.in_flight ? ` · running ${state.in_flight.round_id}` : ''}`,
    );

  // Started by a workflow rather than update-with-start: the first operation came with the input.
  if (input.first && !carried) admit(input.first);

  if (stored && state.rounds) {
    // A session that ran before the session store: its rounds move there, its state shrinks.
    await store.recordSession({ sessionId: id, status: state.status, rounds: state.rounds });
    delete state.rounds;
  }
  describe();

  for (;;) {
    await condition(
      () =>
        pending !== undefined ||
        workflowInfo().continueAsNewSuggested ||
        (stored && state.status !== 'ACTIVE'),
    );
    if (pending === undefined && stored && state.status !== 'ACTIVE') {
      // MERGED or FAILED: the session is over, and so is its workflow.
      await condition(allHandlersFinished);
      return state;
    }
    if (pending === undefined) {
      // Keep the history bounded: a new run with the (small) state only.
      await condition(allHandlersFinished);
      await continueAsNew<typeof session>({ settings: input.settings, state });
      return state;
    }
    const op: SessionOperation = pending;
    const round: SessionRound = {
      round_id: op.round_id,
      kind: op.kind,
      ...(op.text ? { text: op.text } : {}),
      status: 'started',
    };
    state.round_count += 1;
    if (op.kind === 'partial' || op.kind === 'full')
      round.workflow_id = driftRoundWorkflowId(id, op.round_id);
    if (op.kind === 'generate') round.workflow_id = generateRoundWorkflowId(id, op.round_id);
    if (op.kind === 'apply' && state.pinned) round.workflow_id = applyRoundWorkflowId(id, op.round_id);
    /** What this operation changes about the pinned plan and its lock (written with the round's end). */
    let planChange:
      | { pinned: SessionState['pinned']; lock: { reason: string; locked_by: string | null } | null }
      | undefined;
    if (stored) {
      await store.recordSession({
        sessionId: id,
        inFlight: state.in_flight,
        rounds: [round],
        events: [
          {
            source_key: `${op.round_id}:start`,
            round_id: op.round_id,
            type: 'round',
            data: { round_id: op.round_id, kind: op.kind, ...(op.text ? { text: op.text } : {}) },
          },
        ],
      });
    } else {
      state.rounds?.push(round);
    }
    describe();
    const extra: SessionEventInput[] = [];
    if (op.kind === 'merge') {
      // A drift session ends at the merge of its pull request.
      try {
        const lock = stored ? await git.sessionLock({ sessionId: id }) : { locked: false, reason: '' };
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
          const merged =
            onForge && stored
              ? await git.mergePullRequest({
                  sessionId: id,
                  provider: pr.provider as 'github' | 'gitlab' | 'gitea',
                  repositoryUrl: state.repository_url,
                  number: pr.number as number,
                  message,
                })
              : onForge && pr?.provider === 'github'
                ? await git.mergeGitHubPullRequest({
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
          if (stored) await git.recordPullRequestMerged({ sessionId: id, commit: merged.commit });
          round.status = 'completed';
          round.commit = merged.commit;
          state.status = 'MERGED';
        }
      } catch (err) {
        if (isCancellation(err)) throw err;
        round.status = 'failed';
        round.failure_reason = failureReason(err);
      }
    } else if (op.kind === 'pull_request') {
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
        extra.push({
          source_key: `${op.round_id}:pull_request`,
          round_id: op.round_id,
          type: 'pull_request',
          data: { round_id: op.round_id, ...pr },
        });
      } catch (err) {
        if (isCancellation(err)) throw err;
        round.status = 'failed';
        round.failure_reason = failureReason(err);
      }
    } else if (op.kind === 'apply') {
      // Only a generate round pins a plan; drift rounds never do.
      const pinned = state.pinned;
      if (!state.pinned_plan || !pinned) {
        round.status = 'failed';
        round.failure_reason = NO_PINNED_PLAN;
        state.status = 'FAILED';
        log.warn(`Session ${id}: ${NO_PINNED_PLAN}`);
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
          planChange = { pinned: null, lock: null };
        } catch (err) {
          if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
          const reason = isCancellation(err) ? 'The round was cancelled.' : failureReason(err);
          const type = innermostFailure(err).type;
          // Decided by the failure's type; runs whose apply round failed before it carried the
          // refusal's type are recognised by the refusal's text.
          const refusedByText =
            type === ErrorTypes.ApplyRoundFailed &&
            (reason.startsWith('The pinned plan is stale:') || reason.startsWith('The pinned plan violates'));
          if ((type !== undefined && APPLY_REFUSALS.includes(type)) || refusedByText) {
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
    } else if (op.kind === 'generate') {
      try {
        const result: GenerateRoundResult = await executeChild(generateRound, {
          workflowId: generateRoundWorkflowId(id, op.round_id),
          args: [
            {
              ...roundSettings(state, op),
              text: op.text ?? '',
              ...(op.revert?.length ? { revert: op.revert } : {}),
              ...(state.max_repair_cycles !== undefined
                ? { max_repair_cycles: state.max_repair_cycles }
                : {}),
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
          state.pinned_plan = result.pinned_plan.key;
          state.pinned = result.pinned_plan;
          // A revert changes no code: nothing for a pull request to propose.
          if (!op.revert?.length) state.has_changes = true;
          planChange = {
            pinned: result.pinned_plan,
            lock: { reason: planLockReason(op.round_id), locked_by: op.actor_uuid ?? null },
          };
        }
      } catch (err) {
        if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
        round.status = 'failed';
        round.failure_reason = isCancellation(err) ? `The round was cancelled.` : failureReason(err);
        state.status = 'FAILED';
      }
    } else {
      const workflowId = driftRoundWorkflowId(id, op.round_id);
      const roundInput: DriftRoundInput = {
        session_id: id,
        round_id: op.round_id,
        mode: op.kind,
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
        // The session itself is being cancelled: it ends cancelled.
        if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
        round.status = 'failed';
        round.failure_reason = isCancellation(err) ? `The round was cancelled.` : failureReason(err);
        state.status = 'FAILED';
      }
    }
    state.in_flight = null;
    pending = undefined;
    if (stored) {
      await store.recordSession({
        sessionId: id,
        status: state.status,
        inFlight: null,
        rounds: [round],
        events: [...extra, roundEndEvent(round, state)],
        ...(planChange ? { pinnedPlan: planChange.pinned ?? null, planLock: planChange.lock } : {}),
      });
    }
    describe();
  }
}
