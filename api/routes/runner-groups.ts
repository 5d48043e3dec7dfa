// The runner registry over HTTP, always within the caller's organization: cloud connections,
// runner groups (the environment each should have), their executions and drift plans.
import type { SecretBox } from '../../shared/infra/secret-box';
import { roleAtLeast } from '../../shared/infra/db/users';
import { Router } from 'express';
import type { Db } from '../../shared/infra/db';
import {
  createCloudConnection,
  createRunnerGroup,
  getPlan,
  getRunnerGroup,
  listCloudConnections,
  listRunnerGroups,
  updateRunnerGroup,
} from '../../shared/infra/db/runners';
import { cloudConnectionSchema, runnerGroupSchema } from '../../shared/runner-contracts';
import { authenticate, currentUser, requireRole } from '../auth';
import { HttpError, registryError } from '../errors';
import { parseBody, uuidParam } from '../validation';

export function createRunnerGroupsRouter(deps: { db: Db; secrets?: SecretBox }): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  router.post('/api/v1/cloud-connections', auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(cloudConnectionSchema, req.body);
    // Credentials every engine run of the organization will hold: an admin's decision.
    if (spec.credentials && !roleAtLeast(currentUser(req).role, 'admin'))
      throw new HttpError(403, 'forbidden', 'Only an admin stores credentials in a cloud connection.');
    const conn = await createCloudConnection(
      deps.db,
      currentUser(req).organization_uuid,
      spec,
      deps.secrets,
    ).catch(registryError);
    res.status(201).location(`/api/v1/cloud-connections/${conn.cloud_connection_uuid}`).json(conn);
  });

  router.get('/api/v1/cloud-connections', auth, requireRole('developer'), async (req, res) => {
    res.json({ cloud_connections: await listCloudConnections(deps.db, currentUser(req).organization_uuid) });
  });

  router.post('/api/v1/runner-groups', auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(runnerGroupSchema, req.body);
    const group = await createRunnerGroup(deps.db, currentUser(req).organization_uuid, spec).catch(
      registryError,
    );
    res.status(201).location(`/api/v1/runner-groups/${group.runner_group_uuid}`).json(group);
  });

  router.get('/api/v1/runner-groups', auth, requireRole('developer'), async (req, res) => {
    res.json({ runner_groups: await listRunnerGroups(deps.db, currentUser(req).organization_uuid) });
  });

  router.get('/api/v1/runner-groups/:id', auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    const group = await getRunnerGroup(deps.db, currentUser(req).organization_uuid, id);
    if (!group) throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    res.json(group);
  });

  router.put('/api/v1/runner-groups/:id', auth, requireRole('devops'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    const spec = parseBody(runnerGroupSchema, req.body);
    res.json(
      await updateRunnerGroup(deps.db, currentUser(req).organization_uuid, id, spec).catch(registryError),
    );
  });

  router.get('/api/v1/runner-groups/:id/executions', auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Runner group');
    const org = currentUser(req).organization_uuid;
    if (!(await getRunnerGroup(deps.db, org, id)))
      throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    const executions = await deps.db
      .selectFrom('runner_executions')
      .select([
        'runner_execution_uuid',
        'workflow_type',
        'workflow_uuid',
        'workflow_run_uuid',
        'actor_uuid',
        'status',
        'outcome',
        'retry_count',
        'retried_from',
        'created_at',
        'updated_at',
      ])
      .where('runner_group_uuid', '=', id)
      .where('organization_uuid', '=', org)
      .orderBy('created_at', 'desc')
      .limit(200)
      .execute();
    res.json({ executions });
  });

  router.get('/api/v1/runner-plans/:plan_uuid', auth, requireRole('developer'), async (req, res) => {
    const id = uuidParam(req.params.plan_uuid, 'Plan');
    const plan = await getPlan(deps.db, currentUser(req).organization_uuid, id);
    if (!plan) throw new HttpError(404, 'not_found', `Plan ${id} not found.`);
    res.json(plan);
  });
  return router;
}
