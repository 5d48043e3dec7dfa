// POST /api/v1/mapping: the optional mapping sidecar (services.mapping, off by default). When its
// catalogue knows the repository it may answer the provider (cloud) and the scope, so the wizard
// can skip those questions; null means unsure, and anything it answers outside the known clouds
// is treated as unsure too.
import { Router } from 'express';
import { z } from 'zod';
import { CLOUDS, type Cloud } from '../../shared/drift-exceptions';
import { mappingAnswerSchema, mappingRequestSchema } from '../../shared/contracts';
import type { Db } from '../../shared/infra/db';
import { authenticate, requireRole } from '../auth';
import { operation, route } from '../contract';
import { askSidecar } from '../sidecar';
import { parseBody } from '../validation';

export const mappingOperations = {
  map: operation({
    method: 'post',
    path: '/api/v1/mapping',
    summary:
      'Mapping sidecar: the cloud and scope of a known repository, null when unsure or off (developer)',
    body: mappingRequestSchema,
    responses: { 200: { description: 'What the sidecar knows', schema: mappingAnswerSchema } },
    errors: [400, 401, 503],
  }),
};
const sidecarAnswer = z.object({
  provider: z.string().max(64).nullable().optional(),
  scope_id: z.string().nullable().optional(),
});

export function createMappingRouter(deps: { db: Db; mapping: { enabled: boolean; url: string } }): Router {
  const router = Router();
  route(router, mappingOperations.map, authenticate(deps.db), requireRole('developer'), async (req, res) => {
    const body = parseBody(mappingRequestSchema, req.body);
    if (!deps.mapping.enabled) {
      res.json({ provider: null, scope_id: null, checked: false });
      return;
    }
    const answer = await askSidecar({
      baseUrl: deps.mapping.url,
      path: '/map',
      body: { repository_url: body.repository_url, iac_path: body.iac_path ?? '' },
      schema: sidecarAnswer,
      code: 'mapping_unavailable',
      name: 'mapping',
    });
    const provider =
      answer.provider && (CLOUDS as readonly string[]).includes(answer.provider)
        ? (answer.provider as Cloud)
        : null;
    // A scope the first request would refuse (blank, or over its 256 characters) is no answer.
    const scope =
      typeof answer.scope_id === 'string' && answer.scope_id.trim() && answer.scope_id.length <= 256
        ? answer.scope_id
        : null;
    res.json({ provider, scope_id: scope, checked: true });
  });
  return router;
}
