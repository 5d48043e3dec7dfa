// POST /api/v1/drift/partial, /api/v1/drift/full and /api/v1/generate: the first request of a
// session or a follow-up. Answers 202 with the session id before the round runs; the session workflow decides
// at once whether the round may start (one operation per session, none after the session ended),
// and the body says so.
import { randomUUID } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import { z } from 'zod';
import { firstRequestSchema, followUpRequestSchema, type SessionOperation } from '../../shared/contracts';
import { operation, route } from '../contract';
import { authenticate, currentUser, requireRole } from '../auth';
import { requireAuthorized } from '../authz';
import { requireAllowedTarget, requireConnectedRepository } from '../targets';
import {
  acceptedBody,
  newRoundId,
  ownSession,
  openSession,
  submitOperation,
  type OperationOutcome,
  type SessionRouteDeps,
  acceptedAnswer,
} from '../session-operations';
import { parseBody } from '../validation';

const firstOrFollowUp = z.union([firstRequestSchema, followUpRequestSchema]);
const started = acceptedAnswer();
const roundOperation = (path: string, summary: string) =>
  operation({
    method: 'post',
    path,
    summary,
    body: firstOrFollowUp,
    responses: { 202: started },
    errors: [400, 401, 403, 404],
  });

/** The rounds a request starts, each registered below from its declaration (api/contract.ts). */
export const driftOperations = {
  partial: roundOperation('/api/v1/drift/partial', 'Partial drift remediation (devops)'),
  full: roundOperation('/api/v1/drift/full', 'Full drift remediation (devops)'),
  generate: roundOperation(
    '/api/v1/generate',
    'Generate round (devops): the model writes the requested change on the session branch; validate and plan -out; the valid plan is pinned (SHA-256, commit, state serial) and the session locked until apply',
  ),
};

export function createDriftRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  /** A round of `kind`: a session's first request (a new session) or a follow-up in one. */
  const round = async (kind: 'partial' | 'full' | 'generate', req: Request, res: Response) => {
    const user = currentUser(req);
    const body: unknown = req.body;
    const followUp = typeof body === 'object' && body !== null && 'session_id' in body;
    const round_id = newRoundId();
    const op: SessionOperation = { round_id, kind, actor_uuid: user.user_uuid };
    let session_id: string;
    let outcome: OperationOutcome;
    if (followUp) {
      const r = parseBody(followUpRequestSchema, body);
      const row = await ownSession(deps, req, r.session_id);
      await requireAuthorized(deps.authz, req, kind, row);
      session_id = r.session_id;
      outcome = await submitOperation(deps, row, { ...op, text: r.text });
    } else {
      const r = parseBody(firstRequestSchema, body);
      session_id = `s-${randomUUID()}`;
      const iac_path = r.iac_path ?? '';
      await requireAllowedTarget(deps.targets, 'repository_url', r.repository_url);
      await requireConnectedRepository(deps.db, user.organization_uuid, 'repository_url', r.repository_url);
      await requireAuthorized(deps.authz, req, kind, {
        cloud: r.cloud,
        repository_url: r.repository_url,
        iac_path,
      });
      await openSession(
        deps,
        {
          session_id,
          organization_uuid: user.organization_uuid,
          created_by: user.user_uuid,
          repository_url: r.repository_url,
          cloud: r.cloud,
          scope_id: r.scope_id,
          iac_path,
        },
        { ...op, text: r.text },
        { request: { repository_url: r.repository_url, cloud: r.cloud, iac_path, created_by: user.name } },
      );
      outcome = { accepted: true };
    }
    res
      .status(202)
      .location(`/api/v1/sessions/${session_id}`)
      .json(acceptedBody(session_id, round_id, outcome));
  };
  for (const kind of ['partial', 'full', 'generate'] as const)
    route(router, driftOperations[kind], authenticate(deps.db), requireRole('devops'), (req, res) =>
      round(kind, req, res),
    );
  return router;
}
