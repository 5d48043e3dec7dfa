// runner.environment-drift-detect (seed 002): init → detect (seven detectors in parallel) → plan →
// finalize, producing a RunnerEnvironmentDriftPlan. Read-only unless auto_apply is true and drift
// was found: then it chains runner.environment-drift-repair and reports its run id.
import { DETECT_WORKFLOW_TYPE, detectInputSchema, type DetectInput } from '../shared/runner-inputs';
import type { RunnerDagState, RunnerStartContext } from '../shared/runner-contracts';
import { DETECT_DAG } from '../shared/runner-dags';
import { initialState, parseRunnerInput, runDag } from './runner-dag';

export async function runnerEnvironmentDriftDetect(
  raw: DetectInput & RunnerStartContext,
): Promise<RunnerDagState> {
  const { input, context } = parseRunnerInput(raw, detectInputSchema);
  return runDag(
    DETECT_DAG,
    initialState(DETECT_WORKFLOW_TYPE, { ...input, ...context, retry_count: context.retry_count ?? 0 }),
  );
}
