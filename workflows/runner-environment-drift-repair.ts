// runner.environment-drift-repair: carries out a RunnerEnvironmentDriftPlan — creates or repairs
// each resource the plan names (foundation first, then the workloads that refer to it) and, when a
// step fails, compensates what it created in reverse layer order.
import { REPAIR_WORKFLOW_TYPE, repairInputSchema, type RepairInput } from '../shared/runner-inputs';
import type { RunnerDagState, RunnerStartContext } from '../shared/runner-contracts';
import { REPAIR_DAG } from '../shared/runner-dags';
import { initialState, parseRunnerInput, runDag } from './runner-dag';

export async function runnerEnvironmentDriftRepair(
  raw: RepairInput & RunnerStartContext,
): Promise<RunnerDagState> {
  const { input, context } = parseRunnerInput(raw, repairInputSchema);
  return runDag(
    REPAIR_DAG,
    initialState(REPAIR_WORKFLOW_TYPE, { ...input, ...context, retry_count: context.retry_count ?? 0 }),
  );
}
