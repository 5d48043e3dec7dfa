// Signed webhooks over HTTP, always within the caller's organization: devops register an endpoint
// (https, or http on loopback; its host a registered target) for the events they want and get its
// signing secret once; developers read the endpoints and the log of their deliveries.
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
} from '../../shared/infra/db/webhooks';
import type { TargetPolicy } from '../../shared/infra/network-targets';
import {
  webhookCreatedSchema,
  webhookDeliveryListSchema,
  webhookEndpointSchema,
  webhookListSchema,
  webhookSpecSchema,
} from '../../shared/webhook-contracts';
import type { currentUser } from '../auth';
import { authenticate, callerOrganization, requireRole } from '../auth';
import { operation, route } from '../contract';
import { HttpError, registryError } from '../errors';
import { requireAllowedTarget } from '../targets';
import { parseBody, uuidParam } from '../validation';

const webhookId = { id: z.uuid().describe('The endpoint') };

/** The webhook operations, each registered below from its declaration (api/contract.ts). */
export const webhookOperations = {
  create: operation({
    method: 'post',
    path: '/api/v1/webhooks',
    summary:
      'Subscribe an endpoint to drift.detected, drift.resolved, detection.failed, detection.clean; answers the signing secret once (devops)',
    body: webhookSpecSchema,
    responses: {
      201: {
        description: 'Created, with its secret',
        schema: webhookCreatedSchema,
        location: '/api/v1/webhooks/:id',
      },
    },
    errors: [400, 401, 403],
  }),
  list: operation({
    method: 'get',
    path: '/api/v1/webhooks',
    summary: 'Webhook endpoints of the organization (never their secrets)',
    responses: { 200: { description: 'The endpoints', schema: webhookListSchema } },
    errors: [401],
  }),
  detail: operation({
    method: 'get',
    path: '/api/v1/webhooks/:id',
    summary: 'An endpoint of the organization (never its secret)',
    params: webhookId,
    responses: { 200: { description: 'The endpoint', schema: webhookEndpointSchema } },
    errors: [401, 404],
  }),
  delete: operation({
    method: 'delete',
    path: '/api/v1/webhooks/:id',
    summary: 'Remove an endpoint (devops)',
    params: webhookId,
    responses: { 204: { description: 'Removed' } },
    errors: [401, 403, 404],
  }),
  deliveries: operation({
    method: 'get',
    path: '/api/v1/webhooks/:id/deliveries',
    summary: 'Delivery log of an endpoint: attempts, last status code, error, when delivered',
    params: webhookId,
    responses: { 200: { description: 'The deliveries', schema: webhookDeliveryListSchema } },
    errors: [401, 404],
  }),
};

export function createWebhooksRouter(deps: { db: Db; targets?: TargetPolicy }): Router {
  const router = Router();
  const auth = authenticate(deps.db);
  const ops = webhookOperations;
  const org = callerOrganization;

  route(router, ops.create, auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(webhookSpecSchema, req.body);
    await requireAllowedTarget(deps.targets, 'url', spec.url);
    const { endpoint, secret } = await createWebhook(deps.db, org(req), spec);
    // The signing secret is shown here only: the receiver keeps it to check signatures.
    res
      .status(201)
      .location(`/api/v1/webhooks/${endpoint.endpoint_uuid}`)
      .json({ ...endpoint, secret });
  });

  route(router, ops.list, auth, requireRole('developer'), async (req, res) => {
    res.json({ webhooks: await listWebhooks(deps.db, org(req)) });
  });

  const own = async (req: Parameters<typeof currentUser>[0]) => {
    const id = uuidParam(req.params.id, 'Webhook');
    const found = await getWebhook(deps.db, org(req), id);
    if (!found) throw new HttpError(404, 'not_found', `Webhook ${id} not found.`);
    return found;
  };

  route(router, ops.detail, auth, requireRole('developer'), async (req, res) => {
    res.json(await own(req));
  });

  route(router, ops.delete, auth, requireRole('devops'), async (req, res) => {
    await deleteWebhook(deps.db, org(req), uuidParam(req.params.id, 'Webhook')).catch(registryError);
    res.status(204).end();
  });

  route(router, ops.deliveries, auth, requireRole('developer'), async (req, res) => {
    const { endpoint_uuid } = await own(req);
    res.json({ deliveries: await listDeliveries(deps.db, org(req), endpoint_uuid) });
  });
  return router;
}
