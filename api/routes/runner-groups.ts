// The runner registry over HTTP, always within the caller's organization: cloud connections,
// runner groups (the environment each should have), their executions and drift plans.
import { requireAuthorized, runnerWorkTarget, type AuthzConfig } from '../authz';
import type { SecretBox } from '../../shared/infra/secret-box';
import { roleAtLeast } from '../../shared/infra/db/users';
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import {
  createCloudConnection,
  createRunnerGroup,
  getCloudConnection,
  getPlan,
  getRunnerGroup,
  listCloudConnections,
  listExecutions,
  listRunnerGroups,
  updateRunnerGroup,
} from '../../shared/infra/db/runners';
import {
  cloudConnectionAnswerSchema,
  cloudConnectionListSchema,
  cloudConnectionSchema,
  driftPlanAnswerSchema,
  runnerExecutionListSchema,
  runnerGroupAnswerSchema,
  runnerGroupListSchema,
  runnerGroupSchema,
} from '../../shared/runner-contracts';
import { authenticate, callerOrganization, currentUser, requireRole } from '../auth';
import { operation, route } from '../contract';
import { HttpError, registryError } from '../errors';
import { parseBody, uuidParam } from '../validation';

const groupId = { id: z.uuid().describe('The runner group') };

/** The registry's operations, each registered below from its declaration (api/contract.ts). */
export const runnerGroupOperations = {
  createConnection: operation({
    method: 'post',
    path: '/api/v1/cloud-connections',
    summary:
      'Register a cloud connection (devops; a role_arn or credentials: admin): a role to assume, or static credentials stored sealed and never returned',
    body: cloudConnectionSchema,
    responses: {
      201: {
        description: 'Created',
        schema: cloudConnectionAnswerSchema,
        location: '/api/v1/cloud-connections/:id',
      },
    },
    errors: [400, 401, 403, 409],
  }),
  listConnections: operation({
    method: 'get',
    path: '/api/v1/cloud-connections',
    summary: 'Cloud connections of the organization (never their credentials)',
    responses: { 200: { description: 'The connections', schema: cloudConnectionListSchema } },
    errors: [401],
  }),
  connection: operation({
    method: 'get',
    path: '/api/v1/cloud-connections/:id',
    summary: 'A cloud connection (never its credentials)',
    params: { id: z.uuid().describe('The connection') },
    responses: { 200: { description: 'The connection', schema: cloudConnectionAnswerSchema } },
    errors: [401, 404],
  }),
  create: operation({
    method: 'post',
    path: '/api/v1/runner-groups',
    summary: 'Register a runner group and the environment it should have (devops)',
    body: runnerGroupSchema,
    responses: {
      201: {
        description: 'Created',
        schema: runnerGroupAnswerSchema,
        location: '/api/v1/runner-groups/:id',
      },
    },
    errors: [400, 401, 403, 404, 409, 503],
  }),
  list: operation({
    method: 'get',
    path: '/api/v1/runner-groups',
    summary: 'Runner groups of the organization',
    responses: { 200: { description: 'The groups', schema: runnerGroupListSchema } },
    errors: [401],
  }),
  detail: operation({
    method: 'get',
    path: '/api/v1/runner-groups/:id',
    summary: 'A runner group',
    params: groupId,
    responses: { 200: { description: 'The group', schema: runnerGroupAnswerSchema } },
    errors: [401, 404],
  }),
  update: operation({
    method: 'put',
    path: '/api/v1/runner-groups/:id',
    summary: 'Replace a runner group’s name, connection and expected environment (devops)',
    params: groupId,
    body: runnerGroupSchema,
    responses: { 200: { description: 'Updated', schema: runnerGroupAnswerSchema } },
    errors: [400, 401, 403, 404, 409, 503],
  }),
  executions: operation({
    method: 'get',
    path: '/api/v1/runner-groups/:id/executions',
    summary: 'Runner executions of a group (its DAG runs), newest first, at most 200',
    params: groupId,
    responses: { 200: { description: 'The executions', schema: runnerExecutionListSchema } },
    errors: [401, 404],
  }),
  plan: operation({
    method: 'get',
    path: '/api/v1/runner-plans/:plan_uuid',
    summary: 'A RunnerEnvironmentDriftPlan: what a detection found and what a repair would do',
    params: { plan_uuid: z.uuid().describe('The plan') },
    responses: { 200: { description: 'The plan', schema: driftPlanAnswerSchema } },
    errors: [401, 404],
  }),
};

export function createRunnerGroupsRouter(deps: { db: Db; secrets?: SecretBox; authz?: AuthzConfig }): Router {
  const router = Router();
  const auth = authenticate(deps.db);
  const ops = runnerGroupOperations;
  const org = callerOrganization;

  route(router, ops.createConnection, auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(cloudConnectionSchema, req.body);
    // Credentials every engine run of the organization will hold, or a role the worker assumes
    // for them (in whatever account the ARN names): an admin's decision.
    if (spec.credentials && !roleAtLeast(currentUser(req).role, 'admin'))
      throw new HttpError(403, 'forbidden', 'Only an admin stores credentials in a cloud connection.');
    if (spec.role_arn && !roleAtLeast(currentUser(req).role, 'admin'))
      throw new HttpError(403, 'forbidden', 'Only an admin names a role in a cloud connection.');
    const conn = await createCloudConnection(deps.db, org(req), spec, deps.secrets).catch(registryError);
    res.status(201).location(`/api/v1/cloud-connections/${conn.cloud_connection_uuid}`).json(conn);
  });

  route(router, ops.listConnections, auth, requireRole('developer'), async (req, res) => {
    res.json({ cloud_connections: await listCloudConnections(deps.db, org(req)) });
  });

  route(router, ops.connection, auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Cloud connection');
    const conn = await getCloudConnection(deps.db, org(req), id);
    if (!conn) throw new HttpError(404, 'not_found', `Cloud connection ${id} not found.`);
    res.json(conn);
  });

  route(router, ops.create, auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(runnerGroupSchema, req.body);
    await requireAuthorized(deps.authz, req, 'runner_groups.create', runnerWorkTarget(spec));
    const group = await createRunnerGroup(deps.db, org(req), spec).catch(registryError);
    res.status(201).location(`/api/v1/runner-groups/${group.runner_group_uuid}`).json(group);
  });

  route(router, ops.list, auth, requireRole('developer'), async (req, res) => {
    res.json({ runner_groups: await listRunnerGroups(deps.db, org(req)) });
  });

  route(router, ops.detail, auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    const group = await getRunnerGroup(deps.db, org(req), id);
    if (!group) throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    res.json(group);
  });

  route(router, ops.update, auth, requireRole('devops'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    const spec = parseBody(runnerGroupSchema, req.body);
    const before = await getRunnerGroup(deps.db, org(req), id);
    if (!before) throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    // Asked for what the group is and for what it would become.
    await requireAuthorized(deps.authz, req, 'runner_groups.update', runnerWorkTarget(before));
    await requireAuthorized(deps.authz, req, 'runner_groups.update', runnerWorkTarget(spec));
    res.json(await updateRunnerGroup(deps.db, org(req), id, spec).catch(registryError));
  });

  route(router, ops.executions, auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    if (!(await getRunnerGroup(deps.db, org(req), id)))
      throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    res.json({ executions: await listExecutions(deps.db, org(req), id) });
  });

  route(router, ops.plan, auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.plan_uuid, 'Plan');
    const plan = await getPlan(deps.db, org(req), id);
    if (!plan) throw new HttpError(404, 'not_found', `Plan ${id} not found.`);
    res.json(plan);
  });
  return router;
}
