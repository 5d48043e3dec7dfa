// The activities of the runner DAGs (shared/runner-dags.ts), registered under their seed names
// (runner.drift_detect_init, …). Each takes the DAG state and returns its output plus the fields it
// sets on the state; each is safe to run twice.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../../shared/infra/db';
import {
  ensureExecution,
  finishExecution,
  getCloudConnection,
  getPlan,
  getRunnerGroup,
  RegistryError,
  savePlan,
  updatePlan,
  type CloudConnection,
} from '../../shared/infra/db/runners';
import { ErrorTypes } from '../../shared/errors';
import {
  DETECT_WORKFLOW_TYPE,
  RESOURCE_BACKENDS,
  RUNNER_RESOURCES,
  runnerEnvironmentSchema,
  type CompensationInput,
  type DetectorResult,
  type PlannedAction,
  type RunnerDagState,
  type RunnerEnvironment,
  type RunnerResource,
  type StepInput,
  type StepResult,
} from '../../shared/runner-contracts';
import { buildPlan, detectOutcome } from '../../shared/runner-plan';
import type { AwsClients, GcpClient } from './clouds';
import { RESOURCE_HANDLERS, type ResourceContext } from './resources';

/** A runner group's cloud clients, signed with its connection's own credentials. */
export interface RunnerClients {
  aws?: AwsClients;
  gcp?: GcpClient;
}

export interface RunnerDeps {
  db: Db;
  /**
   * The clients for a group's connection, with that connection's credentials (its role assumed
   * for this run, or what an admin stored) — never the worker's own (worker/deps.ts).
   */
  clients(organization_uuid: string, connection: CloudConnection, run: string): Promise<RunnerClients>;
}

type StepActivity = (input: StepInput) => Promise<StepResult>;
type CompensationActivity = (input: CompensationInput) => Promise<Record<string, unknown>>;

interface ResolvedEnvironment {
  environment: RunnerEnvironment;
  connection: CloudConnection | null;
}

function notFound(message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, ErrorTypes.NotFound);
}

/** The environment recorded by the init step of either DAG. */
function resolved(state: RunnerDagState): ResolvedEnvironment & { actions_needed?: PlannedAction[] } {
  const init = (state.drift_detect_init ?? state.drift_repair_init) as
    (ResolvedEnvironment & { actions_needed?: PlannedAction[] }) | undefined;
  if (!init) throw ApplicationFailure.nonRetryable('the init step has not run', ErrorTypes.InvalidInput);
  return { ...init, environment: runnerEnvironmentSchema.parse(init.environment) };
}

async function loadGroup(
  deps: RunnerDeps,
  state: RunnerDagState,
): Promise<ResolvedEnvironment & { name: string }> {
  const group = await getRunnerGroup(deps.db, state.organization_uuid, state.runner_group_uuid).catch(
    (err: unknown) => {
      if (err instanceof RegistryError)
        throw ApplicationFailure.nonRetryable(err.message, ErrorTypes.InvalidInput);
      throw err;
    },
  );
  if (!group) {
    throw notFound(
      `Runner group ${state.runner_group_uuid} not found in organization ${state.organization_uuid}.`,
    );
  }
  const connection = group.cloud_connection_uuid
    ? ((await getCloudConnection(deps.db, state.organization_uuid, group.cloud_connection_uuid)) ?? null)
    : null;
  return { name: group.name, environment: group.environment, connection };
}

export function createRunnerActivities(deps: RunnerDeps) {
  const context = async (env: ResolvedEnvironment, state: RunnerDagState): Promise<ResourceContext> => {
    const connection = env.connection as CloudConnection;
    const clients = await deps
      .clients(state.organization_uuid, connection, `runner ${state.workflow_uuid}`)
      .catch((err: unknown) => {
        if (err instanceof ApplicationFailure) throw err;
        throw ApplicationFailure.nonRetryable(
          `No credentials for cloud connection ${connection.name}: ${(err as Error).message}`,
          ErrorTypes.InvalidInput,
        );
      });
    const none = (cloud: string) =>
      ApplicationFailure.nonRetryable(
        `Cloud connection ${connection.name} is a ${connection.provider} connection: it has no ${cloud} credentials.`,
        ErrorTypes.InvalidInput,
      );
    return {
      environment: env.environment,
      connection,
      aws: () => {
        if (!clients.aws) throw none('AWS');
        return clients.aws;
      },
      gcp: () => {
        if (!clients.gcp) throw none('Google Cloud');
        return clients.gcp;
      },
      repairId: state.workflow_uuid,
    };
  };

  const execution = async (state: RunnerDagState) =>
    ensureExecution(deps.db, {
      organization_uuid: state.organization_uuid,
      runner_group_uuid: state.runner_group_uuid,
      workflow_type: state.workflow_type,
      workflow_uuid: state.workflow_uuid,
      workflow_run_uuid: state.workflow_run_uuid,
      actor_uuid: state.actor_uuid,
      retry_count: state.retry_count,
      retried_from: state.retried_from,
    });

  const detector =
    (resource: RunnerResource): StepActivity =>
    async ({ state }) => {
      const env = resolved(state);
      let r: DetectorResult;
      if (!RESOURCE_BACKENDS[resource].includes(env.environment.backend_type)) {
        r = {
          resource,
          status: 'skipped',
          reason: `Not part of a ${env.environment.backend_type} runner environment.`,
        };
      } else if (!env.connection) {
        r = {
          resource,
          status: 'blocked',
          reason: 'The runner group has no cloud connection yet; register one to check its resources.',
        };
      } else {
        Context.current().heartbeat(resource);
        r = await RESOURCE_HANDLERS[resource].detect(await context(env, state));
      }
      return { output: { ...r } };
    };

  const repairer =
    (resource: RunnerResource): StepActivity =>
    async ({ state }) => {
      const env = resolved(state);
      const action = env.actions_needed?.find((a) => a.resource === resource);
      if (!action) return { output: { status: 'nothing_to_do', created: false } };
      return { output: await RESOURCE_HANDLERS[resource].repair(await context(env, state), action) };
    };

  const compensator =
    (resource: RunnerResource): CompensationActivity =>
    async ({ state, output }) => {
      const handler = RESOURCE_HANDLERS[resource];
      if (output.created !== true || !handler.compensate) return { status: 'nothing_to_undo' };
      return handler.compensate(await context(resolved(state), state), output);
    };

  const activities: Record<
    string,
    StepActivity | CompensationActivity | ((s: RunnerDagState) => Promise<void>)
  > = {
    'runner.drift_detect_init': (async ({ state }) => {
      const group = await loadGroup(deps, state);
      const runner_execution_uuid = await execution(state);
      return {
        output: {
          runner_group: { name: group.name, backend_type: group.environment.backend_type },
          environment: group.environment,
          connection: group.connection,
        },
        fields: {
          runner_execution_uuid,
          backend_type: group.environment.backend_type,
          ...(group.connection ? { cloud_connection_uuid: group.connection.cloud_connection_uuid } : {}),
        },
      };
    }) satisfies StepActivity,

    'runner.drift_build_plan': (async ({ state }) => {
      const results: Record<string, DetectorResult> = {};
      for (const resource of RUNNER_RESOURCES) {
        const r = state[`drift_detect_${resource}`] as DetectorResult | undefined;
        if (r) results[`drift_detect_${resource}`] = r;
      }
      const plan = buildPlan(results);
      const plan_uuid = await savePlan(deps.db, {
        organization_uuid: state.organization_uuid,
        runner_group_uuid: state.runner_group_uuid,
        runner_execution_uuid: state.runner_execution_uuid ?? null,
        workflow_uuid: state.workflow_uuid,
        ...plan,
      });
      return {
        output: {
          plan_uuid,
          plan_status: plan.plan_status,
          actions: plan.actions_needed.length,
          blocked: plan.blocked_resources.length,
        },
        fields: { plan_uuid, ...plan },
      };
    }) satisfies StepActivity,

    'runner.drift_finalize': (async ({ state }) => {
      const outcome = detectOutcome(
        { plan_status: state.plan_status ?? 'clean' },
        !!state.repair_workflow_uuid,
      );
      if (state.plan_uuid && state.repair_workflow_id) {
        await updatePlan(deps.db, state.plan_uuid, {
          repair_status: 'started',
          repair_workflow_uuid: state.repair_workflow_id,
        });
      }
      const completed_at = new Date().toISOString();
      await finishExecution(deps.db, state.workflow_uuid, {
        status: 'completed',
        outcome,
        output: { ...state, status: 'completed', outcome, completed_at },
      });
      return { output: { outcome, plan_uuid: state.plan_uuid ?? null }, fields: { outcome } };
    }) satisfies StepActivity,

    'runner.drift_repair_init': (async ({ state }) => {
      const plan = state.plan_uuid
        ? await getPlan(deps.db, state.organization_uuid, state.plan_uuid)
        : undefined;
      if (!plan || plan.runner_group_uuid !== state.runner_group_uuid) {
        throw notFound(
          `Plan ${state.plan_uuid ?? ''} not found for runner group ${state.runner_group_uuid}.`,
        );
      }
      const group = await loadGroup(deps, state);
      if (!group.connection && plan.actions_needed.length) {
        throw ApplicationFailure.nonRetryable(
          'The runner group has no cloud connection to repair through.',
          ErrorTypes.InvalidInput,
        );
      }
      const runner_execution_uuid = await execution(state);
      await updatePlan(deps.db, plan.plan_uuid, {
        repair_status: 'running',
        repair_workflow_uuid: state.workflow_uuid,
      });
      return {
        output: {
          environment: group.environment,
          connection: group.connection,
          actions_needed: plan.actions_needed,
          detect_workflow_uuid: plan.workflow_uuid,
        },
        fields: {
          runner_execution_uuid,
          backend_type: group.environment.backend_type,
          plan_status: plan.plan_status,
          actions_needed: plan.actions_needed,
          blocked_resources: plan.blocked_resources,
          drift_summary: plan.drift_summary,
          ...(group.connection ? { cloud_connection_uuid: group.connection.cloud_connection_uuid } : {}),
        },
      };
    }) satisfies StepActivity,

    'runner.drift_repair_finalize': (async ({ state }) => {
      const repaired = RUNNER_RESOURCES.filter(
        (r) => (state[`drift_repair_${r}`] as { status?: string } | undefined)?.status === 'repaired',
      );
      if (state.plan_uuid)
        await updatePlan(deps.db, state.plan_uuid, { repair_status: 'repaired', repaired_at: new Date() });
      const completed_at = new Date().toISOString();
      await finishExecution(deps.db, state.workflow_uuid, {
        status: 'completed',
        outcome: 'repaired',
        output: { ...state, status: 'completed', outcome: 'repaired', completed_at },
      });
      return { output: { repaired }, fields: { outcome: 'repaired' } };
    }) satisfies StepActivity,

    'runner.record_execution': async (state: RunnerDagState) => {
      await finishExecution(deps.db, state.workflow_uuid, {
        status: state.status,
        outcome: state.outcome ?? null,
        output: state,
      });
      if (state.workflow_type !== DETECT_WORKFLOW_TYPE && state.plan_uuid) {
        await updatePlan(deps.db, state.plan_uuid, { repair_status: state.status });
      }
    },
  };
  for (const resource of RUNNER_RESOURCES) {
    activities[`runner.drift_detect_${resource}`] = detector(resource);
    activities[`runner.drift_repair_${resource}`] = repairer(resource);
    activities[`runner.drift_compensate_${resource}`] = compensator(resource);
  }
  return activities;
}

export type RunnerActivities = ReturnType<typeof createRunnerActivities>;
