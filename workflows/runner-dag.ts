// The DAG runner: runs a DagDefinition (shared/runner-dags.ts) as Temporal workflow code. Layers
// run in order, the steps of a layer in parallel as activities, each step's output recorded in
// the state under the step's name. A failed step records the failure bookkeeping; in a mutating
// DAG the completed steps are then compensated in reverse layer order.
import {
  ActivityFailure,
  ApplicationFailure,
  log,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { z } from 'zod';
import { DEFAULT_HEARTBEAT_SECONDS } from '../shared/workflow-inputs';
import { ErrorTypes } from '../shared/errors';
import { withSeedFields } from '../shared/runner-inputs';
import type {
  CompensationInput,
  RunnerDagState,
  RunnerStartContext,
  StepInput,
  StepResult,
} from '../shared/runner-contracts';
import type { DagDefinition, DagStep } from '../shared/runner-dags';
import {
  KumossOrganization,
  KumossOutcome,
  KumossPlanStatus,
  KumossRunnerGroup,
} from '../shared/search-attributes';
import { dagStateQuery } from '../shared/messages';
import { runnerRepairWorkflowId } from '../shared/ids';

export { dagStateQuery };

type StepActivity = (input: StepInput) => Promise<StepResult>;
type CompensationActivity = (input: CompensationInput) => Promise<Record<string, unknown>>;

/** Attempts of a step (and of a compensation) before the DAG records it as failed. */
export const STEP_ATTEMPTS = 3;

const NON_RETRYABLE = [ErrorTypes.InvalidInput, ErrorTypes.NotFound, ErrorTypes.CloudRequestRejected];

const steps = proxyActivities<Record<string, StepActivity>>({
  startToCloseTimeout: '2 minutes',
  // Activities heartbeat while they run (worker/heartbeat.ts): a dead worker is noticed in 10 s.
  heartbeatTimeout: `${DEFAULT_HEARTBEAT_SECONDS}s`,
  retry: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '20s',
    maximumAttempts: STEP_ATTEMPTS,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

// One attempt per call: the workflow counts compensation retries itself (comp_retry_count).
const compensations = proxyActivities<Record<string, CompensationActivity>>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: `${DEFAULT_HEARTBEAT_SECONDS}s`,
  retry: { maximumAttempts: 1 },
});

function describeError(err: unknown): { message: string; type: string } {
  let cause: unknown = err;
  if (err instanceof ActivityFailure && err.cause) cause = err.cause;
  if (cause instanceof ApplicationFailure)
    return { message: cause.message, type: cause.type ?? 'ApplicationFailure' };
  if (cause instanceof Error) return { message: cause.message, type: cause.name };
  return { message: String(cause), type: 'Error' };
}

function activityOf(record: Record<string, StepActivity>, step: DagStep): StepActivity {
  const fn = record[step.activity];
  if (!fn) throw ApplicationFailure.nonRetryable(`no activity ${step.activity}`, ErrorTypes.InvalidInput);
  return fn;
}

/** Runs `def` over `initial`; returns the final state or fails with it as the failure's details. */
export async function runDag(def: DagDefinition, initial: RunnerDagState): Promise<RunnerDagState> {
  const state = initial;
  setHandler(dagStateQuery, () => state);
  upsertMemo({ organization_uuid: state.organization_uuid, runner_group_uuid: state.runner_group_uuid });
  upsertSearchAttributes([
    { key: KumossOrganization, value: state.organization_uuid },
    { key: KumossRunnerGroup, value: state.runner_group_uuid },
  ]);
  const completed: { layer: number; step: DagStep }[] = [];

  for (const [layerIndex, layer] of def.layers.entries()) {
    if (def.chain && def.chain.before_layer === layer.name) await chain(def, state);
    setCurrentDetails(
      `layer ${layerIndex + 1} of ${def.layers.length}: ${layer.name} (${layer.steps.map((s) => s.name).join(', ')})`,
    );
    const results = await Promise.allSettled(layer.steps.map((step) => activityOf(steps, step)({ state })));
    // Record every step that finished, in the declared order, before looking at failures.
    let failure: { step: DagStep; error: { message: string; type: string } } | undefined;
    for (const [i, result] of results.entries()) {
      const step = layer.steps[i] as DagStep;
      if (result.status === 'fulfilled') {
        state[step.name] = result.value.output;
        Object.assign(state, result.value.fields ?? {});
        completed.push({ layer: layerIndex, step });
      } else {
        failure ??= { step, error: describeError(result.reason) };
        state[step.name] = { status: 'failed', error: describeError(result.reason).message };
      }
    }
    if (!failure) continue;

    state.status = 'failed';
    state.failed_step = failure.step.name;
    state.failed_layer = layer.name;
    state.failed_at_state = {
      layer_index: layerIndex,
      completed_steps: completed.map((c) => c.step.name),
    };
    state.error = failure.error.message;
    state.error_type = failure.error.type;
    state.failure_reason = `Step ${failure.step.name} in layer ${layer.name} failed after its retries: ${failure.error.message}`;
    state.failed_at = new Date().toISOString();
    state.outcome = 'failed';
    log.warn('DAG step failed', { step: failure.step.name, layer: layer.name, error: failure.error.message });
    if (def.mutating) await compensate(def, state, completed, failure.step, layer.name);
    await recordExecution(state);
    upsertSearchAttributes([{ key: KumossOutcome, value: state.outcome }]);
    throw ApplicationFailure.nonRetryable(
      state.failure_reason,
      ErrorTypes.DagStepFailed,
      withSeedFields(state),
    );
  }

  state.status = 'completed';
  state.completed_at = new Date().toISOString();
  upsertSearchAttributes([
    { key: KumossOutcome, value: state.outcome ?? 'completed' },
    ...(state.plan_status ? [{ key: KumossPlanStatus, value: state.plan_status }] : []),
  ]);
  setCurrentDetails(`completed: ${state.outcome ?? ''}`);
  return withSeedFields(state);
}

/** Starts the chained DAG (not waited for) when auto_apply asked for it and there is work. */
async function chain(def: DagDefinition, state: RunnerDagState): Promise<void> {
  if (!def.chain || !state.auto_apply || !state.plan_uuid || !state.actions_needed?.length) return;
  // A UUID from the workflow's own seeded generator (the same on replay), under the group's name:
  // the payload codec finds the run's organization from it.
  const workflowId = runnerRepairWorkflowId(state.runner_group_uuid, uuid4());
  const child = await startChild(def.chain.workflow_type, {
    workflowId,
    args: [
      {
        plan_uuid: state.plan_uuid,
        runner_group_uuid: state.runner_group_uuid,
        organization_uuid: state.organization_uuid,
        ...(state.trace_ref ? { trace_ref: state.trace_ref } : {}),
        ...(state.actor_uuid ? { actor_uuid: state.actor_uuid } : {}),
      },
    ],
    // The repair outlives the detect run that chained it.
    parentClosePolicy: ParentClosePolicy.ABANDON,
    staticSummary: `repair of plan ${state.plan_uuid}`,
  });
  state.repair_workflow_id = workflowId;
  state.repair_workflow_uuid = child.firstExecutionRunId;
  log.info('repair chained', { workflowId, runId: child.firstExecutionRunId });
}

/**
 * Compensations of the completed steps, in reverse layer order (the failed layer first, its
 * completed siblings in reverse declared order), each retried up to STEP_ATTEMPTS times.
 */
async function compensate(
  def: DagDefinition,
  state: RunnerDagState,
  completed: { layer: number; step: DagStep }[],
  failedStep: DagStep,
  failedLayer: string,
): Promise<void> {
  state.compensation_trigger = { step: failedStep.name, layer: failedLayer, error: state.error ?? '' };
  // `completed` is in layer order, declared order within a layer: reversed, it is the undo order.
  const queue = [...completed].reverse().filter((c) => c.step.compensation);
  state.comp_queue = queue.map((c) => c.step.name);
  state.comp_retry_count = {};
  let failed = false;
  for (const item of queue) {
    state.comp_current_layer = def.layers[item.layer]?.name ?? null;
    setCurrentDetails(`compensating ${item.step.name} (layer ${state.comp_current_layer})`);
    const fn = compensations[item.step.compensation as string];
    const output = (state[item.step.name] ?? {}) as Record<string, unknown>;
    let done = false;
    for (let attempt = 1; attempt <= STEP_ATTEMPTS && !done; attempt++) {
      try {
        if (!fn) throw new Error(`no activity ${item.step.compensation}`);
        const result = await fn({ state, step: item.step.name, output });
        state[`${item.step.name}_compensation`] = result;
        done = true;
      } catch (err) {
        if (attempt < STEP_ATTEMPTS) state.comp_retry_count[item.step.name] = attempt;
        else
          state[`${item.step.name}_compensation`] = { status: 'failed', error: describeError(err).message };
      }
    }
    if (!done) failed = true;
    state.comp_queue = state.comp_queue.filter((name) => name !== item.step.name);
  }
  state.comp_current_layer = null;
  state.status = failed ? 'compensation_failed' : 'compensated';
  state.outcome = failed ? 'compensation_failed' : 'compensated';
}

const bookkeeping = proxyActivities<{ 'runner.record_execution': (state: RunnerDagState) => Promise<void> }>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumAttempts: 5 },
});

/** Best effort: the execution record learns about the failure (the workflow's failure is the truth). */
async function recordExecution(state: RunnerDagState): Promise<void> {
  try {
    await bookkeeping['runner.record_execution'](state);
  } catch (err) {
    log.warn('could not record the failed execution', { error: describeError(err).message });
  }
}

/** The state a DAG run starts from. */
export function initialState(
  type: RunnerDagState['workflow_type'],
  fields: Partial<RunnerDagState> & Pick<RunnerDagState, 'runner_group_uuid' | 'organization_uuid'>,
): RunnerDagState {
  const info = workflowInfo();
  return {
    workflow_type: type,
    workflow_uuid: info.workflowId,
    workflow_run_uuid: info.runId,
    status: 'running',
    initiated_at: new Date().toISOString(),
    retry_count: 0,
    failed_step: null,
    failed_layer: null,
    failed_at_state: null,
    compensation_trigger: null,
    comp_current_layer: null,
    comp_queue: null,
    comp_retry_count: null,
    ...fields,
  };
}

/** Splits the server-set context from the caller's input and validates the input. */
export function parseRunnerInput<S extends z.ZodType>(
  raw: unknown,
  schema: S,
): { input: z.output<S>; context: RunnerStartContext } {
  const { actor_uuid, retry_count, retried_from, ...rest } = (raw ?? {}) as Record<string, unknown> &
    RunnerStartContext;
  const parsed = schema.safeParse(rest);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.map(String).join('.') || '(input)'}: ${i.message}`)
      .join('; ');
    throw ApplicationFailure.nonRetryable(`invalid input: ${problems}`, ErrorTypes.InvalidInput);
  }
  return {
    input: parsed.data,
    context: {
      ...(typeof actor_uuid === 'string' ? { actor_uuid } : {}),
      ...(typeof retry_count === 'number' ? { retry_count } : {}),
      ...(typeof retried_from === 'string' ? { retried_from } : {}),
    },
  };
}
