// The session workflow: one per session (workflow id `session:<id>`), owning the session state and
// serialising its operations. Every operation arrives as a signal after the API has answered 202;
// one that finds an operation in flight, or a session whose last round failed, never starts: it
// is logged and nothing in the session changes. Rounds run as child workflows. The history stays
// bounded: when the server suggests it, the session continues as new carrying only its state.
import {
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  NO_PINNED_PLAN,
  type DriftRoundInput,
  type DriftRoundResult,
  type SessionOperation,
  type SessionRound,
  type SessionSettings,
  type SessionState,
} from '../shared/contracts';
import { driftRoundWorkflowId } from '../shared/ids';
import { driftRoundSearchAttributes } from '../shared/search-attributes';
import type { Activities } from '../activities';
import { driftRound } from './drift-round';
import { operationSignal, sessionQuery } from '../shared/messages';

const git = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

export { operationSignal, sessionQuery };

export type SessionInput = { settings: SessionSettings; state?: SessionState };

export function initialState(settings: SessionSettings): SessionState {
  return { ...settings, status: 'ACTIVE', pinned_plan: null, in_flight: null, rounds: [] };
}

function failureReason(err: unknown): string {
  let e: unknown = err;
  // The innermost cause says what went wrong (ChildWorkflowFailure → ApplicationFailure).
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(err);
}

export async function session(input: SessionInput): Promise<SessionState> {
  const state: SessionState = input.state ?? initialState(input.settings);
  const id = state.session_id;
  let pending: SessionOperation | undefined;

  setHandler(sessionQuery, () => state);
  setHandler(operationSignal, (op) => {
    if (state.status !== 'ACTIVE') {
      log.warn(`Session ${id} is finished and cannot be resumed.`, { round_id: op.round_id });
      return;
    }
    if (state.in_flight || pending) {
      log.warn(`Session ${id} already has an operation in flight.`, { round_id: op.round_id });
      return;
    }
    if (state.rounds.some((r) => r.round_id === op.round_id)) return; // a redelivered request
    pending = op;
    state.in_flight = { round_id: op.round_id, kind: op.kind };
  });

  const describe = (): void =>
    setCurrentDetails(
      `${state.status} · ${state.rounds.length} round(s)${state.in_flight ? ` · running ${state.in_flight.round_id}` : ''}`,
    );
  describe();

  for (;;) {
    await condition(() => pending !== undefined || workflowInfo().continueAsNewSuggested);
    if (pending === undefined) {
      // Keep the history bounded: a new run with the state only.
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
    state.rounds.push(round);
    describe();
    if (op.kind === 'merge') {
      // A drift session ends at the merge of its pull request.
      try {
        const message = op.text ?? `Merge ${state.branch}`;
        const merged =
          op.pull_request?.provider === 'github'
            ? await git.mergeGitHubPullRequest({
                repositoryUrl: state.repository_url,
                number: op.pull_request.number,
                message,
              })
            : await git.mergeSessionBranch({
                repositoryUrl: state.repository_url,
                head: state.branch,
                message,
              });
        round.status = 'completed';
        round.commit = merged.commit;
        state.status = 'MERGED';
      } catch (err) {
        round.status = 'failed';
        round.failure_reason = failureReason(err);
      }
    } else if (op.kind === 'apply') {
      // Only a generate round pins a plan; drift rounds never do.
      if (!state.pinned_plan) {
        round.status = 'failed';
        round.failure_reason = NO_PINNED_PLAN;
        state.status = 'FAILED';
        log.warn(`Session ${id}: ${NO_PINNED_PLAN}`);
      }
    } else {
      const workflowId = driftRoundWorkflowId(id, op.round_id);
      round.workflow_id = workflowId;
      const roundInput: DriftRoundInput = {
        session_id: id,
        round_id: op.round_id,
        mode: op.kind,
        repository_url: state.repository_url,
        cloud: state.cloud,
        scope_id: state.scope_id,
        iac_path: state.iac_path,
        text: op.text ?? '',
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
      } catch (err) {
        if (isCancellation(err)) throw err; // the session itself is being cancelled
        round.status = 'failed';
        round.failure_reason = failureReason(err);
        state.status = 'FAILED';
      }
    }
    state.in_flight = null;
    pending = undefined;
    describe();
  }
}
