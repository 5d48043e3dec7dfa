// POST /api/v1/auth/authorize: the preflight before a session's first request. With
// services.authz.enabled false (the shipped default) it answers authorized without contacting
// anything. Enabled, it asks the authz sidecar with the cloud, the repository URL as the project
// and the IaC path as the environment — never the scope id (api/authz.ts; the routes that start
// work ask the same question).
import { Router } from 'express';
import { z } from 'zod';
import { authorizeAnswerSchema, authorizeRequestSchema } from '../../shared/contracts';
import type { Db } from '../../shared/infra/db';
import { authenticate, requireRole } from '../auth';
import { askAuthz, callerOf, type AuthzConfig } from '../authz';
import { errorBodySchema } from '../errors';
import { operation, route } from '../contract';
import { parseBody } from '../validation';

export const authorizeOperations = {
  authorize: operation({
    method: 'post',
    path: '/api/v1/auth/authorize',
    summary:
      'Authorization preflight before a first request: the authz sidecar asked with the cloud, the repository and the IaC path (developer)',
    body: authorizeRequestSchema,
    responses: {
      200: { description: 'Authorized (or no check configured)', schema: authorizeAnswerSchema },
      403: {
        description: 'Not authorized: the sidecar’s answer, or a role too low (an error)',
        schema: z.union([authorizeAnswerSchema, errorBodySchema]),
      },
    },
    errors: [400, 401, 503],
  }),
};

export interface AuthzDeps {
  db: Db;
  authz: AuthzConfig;
}

export function createAuthorizeRouter(deps: AuthzDeps): Router {
  const router = Router();
  route(
    router,
    authorizeOperations.authorize,
    authenticate(deps.db),
    requireRole('developer'),
    async (req, res) => {
      const body = parseBody(authorizeRequestSchema, req.body);
      if (!deps.authz.enabled) {
        res.json({
          authorized: true,
          checked: false,
          reason: 'services.authz.enabled is false: no external check runs.',
        });
        return;
      }
      const answer = await askAuthz(
        deps.authz,
        { cloud: body.cloud, repository_url: body.repository_url, iac_path: body.iac_path ?? '' },
        callerOf(req, 'preflight'),
      );
      res.status(answer.authorized ? 200 : 403).json({
        authorized: answer.authorized,
        checked: true,
        ...(answer.reason ? { reason: answer.reason } : {}),
      });
    },
  );
  return router;
}
