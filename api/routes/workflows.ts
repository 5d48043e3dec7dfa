// The DAG workflows over HTTP (seed 002 "API Usage"):
//   POST /api/workflows/start                  {workflow_type, initial_data} → 202 + the run's ids
//   GET  /api/workflows/{workflow_uuid}        status and output (workflow id or run id)
//   POST /api/workflows/{workflow_uuid}/retry  a failed run again, with retry_count / retried_from
// organization_uuid comes from the authenticated caller, never from the body.
import { requireAuthorized, runnerWorkTarget, type AuthzConfig } from '../authz';
import { randomUUID } from 'node:crypto';
import { Router, type Request } from 'express';
import {
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import { getPlan, getRunnerGroup, RegistryError } from '../../shared/infra/db/runners';
import type { Role } from '../../shared/infra/db/users';
import {
  DETECT_WORKFLOW_TYPE,
  detectInputSchema,
  REPAIR_WORKFLOW_TYPE,
  repairInputSchema,
  RUNNER_WORKFLOW_TYPES,
  workflowRunSchema,
  workflowStartedSchema,
  workflowStartRequestSchema,
  type RunnerDagState,
  type RunnerStartContext,
  type RunnerWorkflowType,
} from '../../shared/runner-contracts';
import { KumossOrganization, KumossRunnerGroup } from '../../shared/search-attributes';
import { dagStateQuery } from '../../shared/messages';
import { assertRole, authenticate, currentUser, requireRole } from '../auth';
import { operation, route } from '../contract';
import { HttpError } from '../errors';
import { parseBody } from '../validation';

export interface WorkflowRouteDeps {
  db: Db;
  client: Client;
  taskQueue: string;
  authz?: AuthzConfig;
}

const workflowId = {
  workflow_uuid: z.string().describe('The workflow id, or a run id (repair_workflow_uuid is one)'),
};
const started = (description: string) => ({
  description,
  schema: workflowStartedSchema,
  location: '/api/workflows/:workflow_uuid',
});

/** The DAG operations, each registered below from its declaration (api/contract.ts). */
export const workflowOperations = {
  start: operation({
    method: 'post',
    path: '/api/workflows/start',
    summary:
      'Start runner.environment-drift-detect (developer; devops with auto_apply) or runner.environment-drift-repair (devops)',
    body: workflowStartRequestSchema,
    responses: { 202: started('Started') },
    errors: [400, 401, 403, 404, 409, 503],
  }),
  run: operation({
    method: 'get',
    path: '/api/workflows/:workflow_uuid',
    summary: 'Status and output (every field of the seed output schema) of a run, by workflow id or run id',
    params: workflowId,
    responses: { 200: { description: 'Status and output', schema: workflowRunSchema } },
    errors: [401, 404, 503],
  }),
  retry: operation({
    method: 'post',
    path: '/api/workflows/:workflow_uuid/retry',
    summary: 'Start a failed run again (retry_count + 1, retried_from)',
    params: workflowId,
    responses: { 202: started('Started again') },
    errors: [401, 403, 404, 409, 503],
  }),
};

const INPUT_SCHEMAS = {
  [DETECT_WORKFLOW_TYPE]: detectInputSchema,
  [REPAIR_WORKFLOW_TYPE]: repairInputSchema,
};

/** Detection is read-only: a developer may run it. Anything that can mutate needs devops. */
function roleFor(type: RunnerWorkflowType, input: object): Role {
  return type === REPAIR_WORKFLOW_TYPE || ('auto_apply' in input && input.auto_apply === true)
    ? 'devops'
    : 'developer';
}

function isRunnerType(t: string): t is RunnerWorkflowType {
  return (RUNNER_WORKFLOW_TYPES as readonly string[]).includes(t);
}

/** Validates a start request within the caller's organization; throws the 4xx that fits. */
async function prepareStart(deps: WorkflowRouteDeps, req: Request, body: unknown) {
  const user = currentUser(req);
  const { workflow_type, initial_data } = parseBody(workflowStartRequestSchema, body);
  if (!isRunnerType(workflow_type)) {
    throw new HttpError(
      400,
      'unknown_workflow_type',
      `Unknown workflow_type ${JSON.stringify(workflow_type)}: use one of ${RUNNER_WORKFLOW_TYPES.join(', ')}.`,
      'workflow_type',
    );
  }
  const named = initial_data.organization_uuid;
  if (named !== undefined && named !== user.organization_uuid) {
    throw new HttpError(
      403,
      'forbidden',
      'initial_data.organization_uuid names another organization; it is set from your credentials (leave it out).',
      'initial_data.organization_uuid',
    );
  }
  const data = { ...initial_data, organization_uuid: user.organization_uuid };
  const input = prefixFields(() => parseBody(INPUT_SCHEMAS[workflow_type], data));
  assertRole(user, roleFor(workflow_type, input));
  const group = await getRunnerGroup(deps.db, user.organization_uuid, input.runner_group_uuid).catch(
    (err: unknown) => {
      if (err instanceof RegistryError) throw new HttpError(409, 'conflict', err.message);
      throw err;
    },
  );
  if (!group) {
    throw new HttpError(
      404,
      'not_found',
      `Runner group ${input.runner_group_uuid} not found.`,
      'initial_data.runner_group_uuid',
    );
  }
  await requireAuthorized(
    deps.authz,
    req,
    workflow_type === DETECT_WORKFLOW_TYPE ? 'runner.detect' : 'runner.repair',
    runnerWorkTarget(group),
  );
  if ('plan_uuid' in input) {
    const plan = await getPlan(deps.db, user.organization_uuid, input.plan_uuid);
    if (!plan || plan.runner_group_uuid !== input.runner_group_uuid) {
      throw new HttpError(
        404,
        'not_found',
        `Plan ${input.plan_uuid} not found for this runner group.`,
        'initial_data.plan_uuid',
      );
    }
  }
  return { workflow_type, input };
}

/** A 400 from parseBody names the field inside initial_data. */
function prefixFields<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof HttpError && err.status === 400) {
      const field = err.field ? `initial_data.${err.field}` : 'initial_data';
      throw new HttpError(400, err.code, `initial_data.${err.message}`, field);
    }
    throw err;
  }
}

async function start(
  deps: WorkflowRouteDeps,
  type: RunnerWorkflowType,
  input: { runner_group_uuid: string; organization_uuid: string },
  context: RunnerStartContext,
) {
  const workflow_uuid = randomUUID();
  const handle = await deps.client.workflow.start(type, {
    workflowId: workflow_uuid,
    taskQueue: deps.taskQueue,
    args: [{ ...input, ...context }],
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    memo: { organization_uuid: input.organization_uuid, runner_group_uuid: input.runner_group_uuid },
    typedSearchAttributes: [
      { key: KumossOrganization, value: input.organization_uuid },
      { key: KumossRunnerGroup, value: input.runner_group_uuid },
    ],
    staticSummary: `${type} for runner group ${input.runner_group_uuid}`,
  });
  return {
    workflow_uuid,
    workflow_run_uuid: handle.firstExecutionRunId,
    workflow_type: type,
    status: 'RUNNING',
  };
}

/** The caller's run by workflow id or run id, or 404 (another organization's run is not found). */
async function findRun(deps: WorkflowRouteDeps, req: Request, id: string) {
  const user = currentUser(req);
  const missing = new HttpError(404, 'not_found', `Workflow ${id} not found.`);
  if (!/^[A-Za-z0-9._:-]{1,200}$/.test(id)) throw missing;
  let handle: WorkflowHandle = deps.client.workflow.getHandle(id);
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    // Not a workflow id: maybe a run id (repair_workflow_uuid is one).
    if (!/^[0-9a-f-]{36}$/.test(id)) throw missing;
    let found: { workflowId: string; runId: string } | undefined;
    for await (const wf of deps.client.workflow.list({ query: `RunId = '${id}'` })) {
      found = wf;
      break;
    }
    if (!found) throw missing;
    handle = deps.client.workflow.getHandle(found.workflowId, found.runId);
    description = await handle.describe();
  }
  const memoOrg = description.memo?.organization_uuid;
  const attrOrg = description.typedSearchAttributes.get(KumossOrganization);
  if (!isRunnerType(description.type) || (memoOrg ?? attrOrg) !== user.organization_uuid) throw missing;
  return { handle, description };
}

/** The run's state: its result, the state its failure carries, or (running) what it reports now. */
async function runState(handle: WorkflowHandle, status: string): Promise<RunnerDagState | null> {
  if (status === 'COMPLETED') return (await handle.result()) as RunnerDagState;
  if (status === 'FAILED') {
    try {
      await handle.result();
    } catch (err) {
      const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
      if (cause instanceof ApplicationFailure && cause.details?.[0])
        return cause.details[0] as RunnerDagState;
    }
    return null;
  }
  if (status === 'RUNNING') {
    try {
      return await handle.query(dagStateQuery);
    } catch {
      return null; // no worker has picked it up yet
    }
  }
  return null;
}

export function createWorkflowsRouter(deps: WorkflowRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  route(router, workflowOperations.start, auth, requireRole('developer'), async (req, res) => {
    const user = currentUser(req);
    const { workflow_type, input } = await prepareStart(deps, req, req.body);
    const started = await start(deps, workflow_type, input, { actor_uuid: user.user_uuid });
    res.status(202).location(`/api/workflows/${started.workflow_uuid}`).json(started);
  });

  route(router, workflowOperations.run, auth, requireRole('developer'), async (req, res) => {
    const { handle, description } = await findRun(deps, req, String(req.params.workflow_uuid));
    const status = description.status.name;
    res.json({
      workflow_uuid: description.workflowId,
      workflow_run_uuid: description.runId,
      workflow_type: description.type,
      status,
      started_at: description.startTime,
      closed_at: description.closeTime ?? null,
      output: await runState(handle, status),
    });
  });

  route(router, workflowOperations.retry, auth, requireRole('developer'), async (req, res) => {
    const user = currentUser(req);
    const { handle, description } = await findRun(deps, req, String(req.params.workflow_uuid));
    const status = description.status.name;
    if (!['FAILED', 'TERMINATED', 'TIMED_OUT', 'CANCELLED'].includes(status)) {
      throw new HttpError(
        409,
        'conflict',
        `Workflow ${description.workflowId} is ${status}; only a failed run can be retried.`,
      );
    }
    const previous = await runState(handle, status);
    if (!previous)
      throw new HttpError(409, 'conflict', `Workflow ${description.workflowId} left no state to retry from.`);
    const type = description.type as RunnerWorkflowType;
    const original =
      type === DETECT_WORKFLOW_TYPE
        ? {
            runner_group_uuid: previous.runner_group_uuid,
            organization_uuid: user.organization_uuid,
            auto_apply: previous.auto_apply ?? false,
            ...(previous.trace_ref ? { trace_ref: previous.trace_ref } : {}),
          }
        : {
            plan_uuid: previous.plan_uuid,
            runner_group_uuid: previous.runner_group_uuid,
            organization_uuid: user.organization_uuid,
            ...(previous.trace_ref ? { trace_ref: previous.trace_ref } : {}),
          };
    const { input } = await prepareStart(deps, req, { workflow_type: type, initial_data: original });
    const started = await start(deps, type, input, {
      actor_uuid: user.user_uuid,
      retry_count: (previous.retry_count ?? 0) + 1,
      retried_from: description.workflowId,
    });
    res
      .status(202)
      .location(`/api/workflows/${started.workflow_uuid}`)
      .json({ ...started, retried_from: description.workflowId });
  });
  return router;
}
