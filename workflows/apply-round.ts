// An apply round (issue 16): status apply, then completed or failed. It runs exactly the plan a
// generate round pinned (activities/generate-round.ts applyPinnedPlan): refused when the branch or
// the state moved since it was planned, never applied twice.
import {
  ApplicationFailure,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { applyRoundInputSchema, type ApplyRoundInput } from '../shared/workflow-inputs';
import type { ApplyRoundResult } from '../shared/contracts';
import { APPLY_REFUSALS, ErrorTypes, innermostFailure } from '../shared/errors';
import {
  failureLogKey,
  parseRoundInput,
  roundFailureReason,
  roundRecorder,
  roundRefOf,
} from './round-recorder';

/** A failed apply records its log as the round's report (runs started before replay without it). */
export const APPLY_FAILURE_LOG_PATCH = 'apply-failure-log';

export async function applyRound(rawInput: ApplyRoundInput): Promise<ApplyRoundResult> {
  const input = parseRoundInput(applyRoundInputSchema, rawInput, 'apply round');
  const engine = proxyActivities<Activities>({
    startToCloseTimeout: '2 hours',
    heartbeatTimeout: `${input.heartbeat_timeout_seconds}s`,
    retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
  });
  const rec = roundRecorder(input.session_id, input.round_id);
  try {
    rec.status('apply', `Applying the plan pinned by round ${input.pinned.round_id}`);
    const out = await engine.applyPinnedPlan({
      ref: roundRefOf(input),
      pinned: input.pinned,
    });
    rec.artifact(out.logKey, 'report');
    rec.status('completed', out.summary);
    return {
      session_id: input.session_id,
      round_id: input.round_id,
      status: 'completed',
      summary: out.summary,
      log_key: out.logKey,
      state_serial: out.stateSerial,
    };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const logKey = failureLogKey(err);
    const withLog = logKey !== undefined && patched(APPLY_FAILURE_LOG_PATCH);
    if (withLog) rec.artifact(logKey, 'report');
    rec.status('failed');
    const reason = roundFailureReason(err);
    setCurrentDetails(`Failed: ${reason}`);
    // A refusal keeps its type (StalePlan, ComplianceViolation): the session decides by it.
    const inner = innermostFailure(err, 1).type;
    throw ApplicationFailure.create({
      message: reason,
      type: inner && APPLY_REFUSALS.includes(inner) ? inner : ErrorTypes.ApplyRoundFailed,
      nonRetryable: true,
      details: withLog ? [{ log_key: logKey }] : [],
    });
  } finally {
    await rec.flushed();
  }
}
