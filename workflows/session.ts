// The session workflow: one per session (workflow id `session:<id>`), serialising its operations.
// Operations arrive as Updates (update-with-start for the first): the validator refuses one while
// another is in flight or once the session is finished, so a refused operation never starts,
// costs no history, and the caller learns it at once. Rounds run as child workflows; pull requests
// are opened and merged here, never inside an API request. The session's status, rounds and
// events are written to the metadata store as they happen (activities/session-store.ts), so the
// workflow keeps only what it needs, and a MERGED or FAILED session's workflow completes.
// Each operation kind is run by its handler in workflows/session-handlers.ts. A change that would
// decide differently for a run already in flight is versioned: docs/api.md, "Shipping a workflow
// change".
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  NOTHING_TO_PROPOSE,
  SessionRefusals,
  sessionBusyMessage,
  sessionFinishedMessage,
} from '../shared/workflow-inputs';
import type { SessionOperation, SessionRound, SessionSettings, SessionState } from '../shared/contracts';
import type { SessionEventInput } from '../shared/infra/db/sessions';
import { applyRoundWorkflowId, driftRoundWorkflowId, generateRoundWorkflowId } from '../shared/ids';
import type { Activities } from '../activities';
import { operationUpdate, sessionQuery } from '../shared/messages';
import { OPERATION_HANDLERS } from './session-handlers';

/** Metadata-store writes: short, retried until the store answers (a session waits for it). */
const store = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export { operationUpdate, sessionQuery };

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
  const state: SessionState = input.state ? { ...input.state } : initialState(input.settings);
  const id = state.session_id;
  let pending: SessionOperation | undefined;

  const refusal = (op: SessionOperation): { type: string; message: string } | undefined => {
    if (state.status !== 'ACTIVE')
      return { type: SessionRefusals.Finished, message: sessionFinishedMessage(id) };
    if (state.in_flight || pending) return { type: SessionRefusals.Busy, message: sessionBusyMessage(id) };
    if (op.kind === 'pull_request' && !state.has_changes) {
      return { type: SessionRefusals.NothingToPropose, message: NOTHING_TO_PROPOSE };
    }
    if (op.kind === 'merge' && !state.pull_request && !op.pull_request) {
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
  if (input.first && !input.state) admit(input.first);

  describe();

  for (;;) {
    await condition(
      () => pending !== undefined || workflowInfo().continueAsNewSuggested || state.status !== 'ACTIVE',
    );
    if (pending === undefined && state.status !== 'ACTIVE') {
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
    describe();
    const { events: extra, planChange } = await OPERATION_HANDLERS[op.kind]({ id, state, op, round });
    state.in_flight = null;
    pending = undefined;
    await store.recordSession({
      sessionId: id,
      status: state.status,
      inFlight: null,
      rounds: [round],
      events: [...extra, roundEndEvent(round, state)],
      ...(planChange ? { pinnedPlan: planChange.pinned ?? null, planLock: planChange.lock } : {}),
    });
    describe();
  }
}
