// The two runner DAGs declared as data, the way seed 002 tabulates them: layers in order, the
// steps of a layer run in parallel, each step an activity whose output is recorded under the
// step's name, and (for the mutating DAG) the compensation that undoes a step. Sandbox-safe.
import { DETECT_WORKFLOW_TYPE, REPAIR_WORKFLOW_TYPE, type RunnerWorkflowType } from './runner-inputs';

export interface DagStep {
  /** The step's name: its output is recorded under it (drift_detect_ecs_cluster, …). */
  name: string;
  /** The activity type that runs it (runner.drift_detect_ecs_cluster, …). */
  activity: string;
  /** The activity that undoes it when a later step of a mutating DAG fails. */
  compensation?: string;
}

export interface DagLayer {
  name: string;
  steps: DagStep[];
}

export interface DagDefinition {
  type: RunnerWorkflowType;
  /** A mutating DAG compensates, in reverse layer order, when a step fails. */
  mutating: boolean;
  layers: DagLayer[];
  /** Start another DAG (not waited for) before a layer, when the state asks for it. */
  chain?: { workflow_type: RunnerWorkflowType; before_layer: string };
}

const step = (name: string, compensation?: string): DagStep => ({
  name,
  activity: `runner.${name}`,
  ...(compensation ? { compensation: `runner.${compensation}` } : {}),
});

export const DETECT_DAG: DagDefinition = {
  type: DETECT_WORKFLOW_TYPE,
  mutating: false,
  layers: [
    { name: 'init', steps: [step('drift_detect_init')] },
    {
      name: 'detect',
      steps: [
        step('drift_detect_ecs_cluster'),
        step('drift_detect_log_group'),
        step('drift_detect_task_definition'),
        step('drift_detect_pull_secret'),
        step('drift_detect_gce_service_account'),
        step('drift_detect_gce_instance_template'),
        step('drift_detect_cloud_run_job'),
      ],
    },
    { name: 'plan', steps: [step('drift_build_plan')] },
    { name: 'finalize', steps: [step('drift_finalize')] },
  ],
  // auto_apply with drift found: the mutating repair, started before finalize records its id.
  chain: { workflow_type: REPAIR_WORKFLOW_TYPE, before_layer: 'finalize' },
};

export const REPAIR_DAG: DagDefinition = {
  type: REPAIR_WORKFLOW_TYPE,
  mutating: true,
  layers: [
    { name: 'init', steps: [step('drift_repair_init')] },
    {
      // What the workloads refer to: cluster, log group, pull secret, service account.
      name: 'foundation',
      steps: [
        step('drift_repair_ecs_cluster', 'drift_compensate_ecs_cluster'),
        step('drift_repair_log_group', 'drift_compensate_log_group'),
        step('drift_repair_pull_secret'),
        step('drift_repair_gce_service_account', 'drift_compensate_gce_service_account'),
      ],
    },
    {
      name: 'workload',
      steps: [
        step('drift_repair_task_definition', 'drift_compensate_task_definition'),
        step('drift_repair_gce_instance_template', 'drift_compensate_gce_instance_template'),
        step('drift_repair_cloud_run_job', 'drift_compensate_cloud_run_job'),
      ],
    },
    { name: 'finalize', steps: [step('drift_repair_finalize')] },
  ],
};

export const RUNNER_DAGS: Record<RunnerWorkflowType, DagDefinition> = {
  [DETECT_WORKFLOW_TYPE]: DETECT_DAG,
  [REPAIR_WORKFLOW_TYPE]: REPAIR_DAG,
};

/** Every activity type the DAGs name (steps and compensations). */
export function dagActivityTypes(def: DagDefinition): string[] {
  return def.layers.flatMap((l) =>
    l.steps.flatMap((s) => [s.activity, ...(s.compensation ? [s.compensation] : [])]),
  );
}
