// What the runner workflows parse and name: their types, their inputs' schemas, the seed's output
// fields. Apart from the runner contracts (shared/runner-contracts.ts re-exports all of it): the
// workflow sandbox evaluates a workflow's imports again for each workflow it creates (see
// shared/workflow-inputs.ts). Sandbox-safe.
import { z } from 'zod';
import type { RunnerDagState } from './runner-contracts';

/** A UUID field of the runner contracts. */
export const uuid = z.string().uuid('must be a UUID');

export const DETECT_WORKFLOW_TYPE = 'runner.environment-drift-detect';

export const REPAIR_WORKFLOW_TYPE = 'runner.environment-drift-repair';
export const RUNNER_WORKFLOW_TYPES = [DETECT_WORKFLOW_TYPE, REPAIR_WORKFLOW_TYPE] as const;
export type RunnerWorkflowType = (typeof RUNNER_WORKFLOW_TYPES)[number];

/** runner.environment-drift-detect input (seed 002 input schema). */
export const detectInputSchema = z
  .object({
    runner_group_uuid: uuid,
    organization_uuid: uuid,
    auto_apply: z.boolean().default(false),
    trace_ref: z.string().max(512).optional(),
  })
  .strict();
export type DetectInput = z.input<typeof detectInputSchema>;

/** runner.environment-drift-repair input: the plan to carry out. */
export const repairInputSchema = z
  .object({
    plan_uuid: uuid,
    runner_group_uuid: uuid,
    organization_uuid: uuid,
    trace_ref: z.string().max(512).optional(),
  })
  .strict();
export type RepairInput = z.input<typeof repairInputSchema>;

/** Every field of seed 002's output schema, in its order: a run's output carries each (null when unset). */
export const SEED_OUTPUT_FIELDS = [
  'runner_group_uuid',
  'organization_uuid',
  'runner_execution_uuid',
  'workflow_uuid',
  'status',
  'outcome',
  'initiated_at',
  'completed_at',
  'failed_at',
  'failure_reason',
  'error',
  'error_type',
  'actor_uuid',
  'reason',
  'workflow_run_uuid',
  'retry_count',
  'retried_from',
  'failed_step',
  'failed_layer',
  'failed_at_state',
  'compensation_trigger',
  'comp_current_layer',
  'comp_queue',
  'comp_retry_count',
  'plan_uuid',
  'plan_status',
  'repair_workflow_uuid',
  'auto_apply',
  'trace_ref',
  'backend_type',
  'cloud_connection_uuid',
  'actions_needed',
  'blocked_resources',
  'drift_summary',
  'drift_detect_init',
  'drift_detect_ecs_cluster',
  'drift_detect_log_group',
  'drift_detect_task_definition',
  'drift_detect_pull_secret',
  'drift_detect_gce_service_account',
  'drift_detect_gce_instance_template',
  'drift_detect_cloud_run_job',
  'drift_build_plan',
  'drift_finalize',
] as const;

/** The state with every seed output field present (null when the run did not set it). */
export function withSeedFields(state: RunnerDagState): RunnerDagState {
  const out: Record<string, unknown> = { ...state };
  for (const field of SEED_OUTPUT_FIELDS) if (out[field] === undefined) out[field] = null;
  return out as RunnerDagState;
}
