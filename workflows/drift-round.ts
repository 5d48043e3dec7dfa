// A drift round (partial or full remediation) as a Temporal workflow. Statuses: started →
// filtering → generating → validating → report, ending completed, uncompleted (declined, or
// answered without changes) or failed. Plans and reports travel as object keys only.
import {
  ApplicationFailure,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { Duration } from '@temporalio/common';
import { roundProgressQuery } from '../shared/messages';
import type { Activities } from '../activities';
import {
  activeRules,
  driftRoundInputSchema,
  type DriftRoundInput,
  type DriftRoundResult,
  type RoundStatus,
} from '../shared/workflow-inputs';
import { sessionBranch } from '../shared/ids';
import { KumossOutcome } from '../shared/search-attributes';
import { detectAndRemediate } from './detect-and-remediate';
import { parseRoundInput, roundFailureReason, roundRecorder, type RoundRecorder } from './round-recorder';
import { ErrorTypes } from '../shared/errors';

export { roundProgressQuery };

const retry: RetryPolicy = {
  initialInterval: '2s',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 5,
};

/**
 * Every activity heartbeats while it runs (worker/heartbeat.ts), so a worker that dies mid-activity
 * is noticed after `heartbeatSeconds` and the activity retried elsewhere, not after its timeout.
 */
function activities(heartbeatSeconds: number) {
  const heartbeatTimeout: Duration = `${heartbeatSeconds}s`;
  return {
    light: proxyActivities<Activities>({ startToCloseTimeout: '10 minutes', heartbeatTimeout, retry }),
    engine: proxyActivities<Activities>({ startToCloseTimeout: '45 minutes', heartbeatTimeout, retry }),
  };
}

export async function driftRound(rawInput: DriftRoundInput): Promise<DriftRoundResult> {
  const input = parseRoundInput(driftRoundInputSchema, rawInput, 'drift round');
  // Events go to the session store as they happen, in order; the round returns only once all of
  // them are written.
  const rec = roundRecorder(input.session_id, input.round_id, input.max_drift_reports);
  try {
    return await runRound(input, rec);
  } finally {
    await rec.flushed();
  }
}

async function runRound(
  input: ReturnType<typeof driftRoundInputSchema.parse>,
  rec: RoundRecorder,
): Promise<DriftRoundResult> {
  const { light, engine } = activities(input.heartbeat_timeout_seconds);
  const branch = input.branch ?? sessionBranch(input.session_id);
  const progress = rec.progress;
  const setStatus = (s: RoundStatus): void => rec.status(s);
  const addArtifact = (key: string, type: 'artifact' | 'report' = 'artifact'): void =>
    rec.artifact(key, type);
  const base = {
    session_id: input.session_id,
    round_id: input.round_id,
    branch,
    remediated: [],
    unreconciled_count: 0,
    whitelisted_count: 0,
    iterations: 0,
    targets: [] as string[],
    engine_reinits: 0,
  };
  const end = (r: DriftRoundResult): DriftRoundResult => {
    setStatus(r.status);
    setCurrentDetails(r.reason ?? r.summary ?? r.status);
    return r;
  };
  try {
    const ref = {
      sessionId: input.session_id,
      roundId: input.round_id,
      repositoryUrl: input.repository_url,
      iacPath: input.iac_path,
      scopeId: input.scope_id,
      cloud: input.cloud,
      branch,
      ...(input.base_branch ? { baseBranch: input.base_branch } : {}),
      ...(input.engine ? { engine: input.engine } : {}),
      ...(input.state_project_id ? { stateProjectId: input.state_project_id } : {}),
    };
    setCurrentDetails(`Preparing ${input.mode} drift round on ${input.repository_url}`);
    const prepared = await light.prepareRound({ ref, text: input.text });
    addArtifact(prepared.promptKey);
    // Expired rules stop applying; the workflow's clock is deterministic (replay-safe).
    const today = new Date().toISOString().slice(0, 10);
    const roundRef = {
      ...ref,
      rules: activeRules(prepared.rules, today),
      ...(prepared.head ? { head: prepared.head } : {}),
    };

    let targets: string[] = [];
    if (input.mode === 'partial') {
      setStatus('filtering');
      let selection;
      if (input.targets?.length) {
        // Chosen beforehand (drift inbox items): kept where the root still has them, no model asked.
        setCurrentDetails('Checking the chosen targets against the root');
        selection = await light.pinTargets({ ref: roundRef, targets: input.targets });
      } else {
        setCurrentDetails('Filtering the request (drift mode)');
        const decision = await light.filterRequest({ ref: roundRef, text: input.text });
        if (!decision.accepted) return end({ ...base, status: 'uncompleted', reason: decision.reason });
        selection = await light.selectTargets({ ref: roundRef, text: input.text });
      }
      if (selection.targets.length === 0) {
        return end({ ...base, status: 'uncompleted', reason: selection.reason });
      }
      targets = selection.targets;
    }

    const loop = await detectAndRemediate(
      engine,
      roundRef,
      targets,
      { maxIterations: input.max_drift_reports, groupSize: input.drift_group_operations },
      {
        setStatus,
        onIteration: (i, det) => {
          progress.iteration = i;
          progress.operations = det.operationCount;
          progress.groups = det.groupCount;
        },
        addArtifact: (k) => addArtifact(k),
      },
    );

    setStatus('report');
    setCurrentDetails('Writing the drift report');
    const report = await light.writeReport({
      ref: loop.head ? { ...roundRef, head: loop.head } : roundRef,
      mode: input.mode,
      text: input.text,
      baseCommit: prepared.baseCommit,
      iterations: loop.iterations,
      ...(loop.finalOperationsKey ? { finalOperationsKey: loop.finalOperationsKey } : {}),
      ...(loop.whitelistedKey ? { whitelistedKey: loop.whitelistedKey } : {}),
      cycleResultKeys: loop.cycleResultKeys,
    });
    addArtifact(report.reportKey, 'report');
    upsertSearchAttributes([{ key: KumossOutcome, value: report.outcome }]);
    log.info('drift round reported', { outcome: report.outcome, stopped: loop.stoppedBecause });
    return end({
      ...base,
      status: report.changed ? 'completed' : 'uncompleted',
      ...(report.changed ? {} : { reason: 'The round answered without changes.' }),
      outcome: report.outcome,
      summary: report.summary,
      report_key: report.reportKey,
      remediated: report.remediated,
      unreconciled_count: report.unreconciledCount,
      whitelisted_count: report.whitelistedCount,
      iterations: loop.iterations,
      targets,
      stopped_because: loop.stoppedBecause,
      engine_reinits: loop.reinits,
    });
  } catch (err) {
    if (isCancellation(err)) {
      // Cancelled (an operator, or the session): the run ends cancelled, not failed.
      setCurrentDetails('Cancelled');
      throw err;
    }
    setStatus('failed');
    const reason = roundFailureReason(err);
    setCurrentDetails(`Failed: ${reason}`);
    throw ApplicationFailure.nonRetryable(`Drift round failed: ${reason}`, ErrorTypes.DriftRoundFailed);
  }
}
