// GET /api/v1/sessions/{id}: the session detail — scope, state project id, status, rounds,
// reports and artifacts with presigned URLs that expire. POST /api/v1/sessions/{id}/apply: 202;
// the session workflow fails it in the background when no plan is pinned.
import { Router } from 'express';
import type { ArtifactStore } from '../../activities/artifacts';
import { authenticate, currentUser, requireRole } from '../auth';
import { newRoundId, ownSession, sessionState, submit, type SessionRouteDeps } from './drift';

export interface SessionDetailDeps extends SessionRouteDeps {
  artifacts: ArtifactStore;
  presignTtlSeconds: number;
}

export function createSessionsRouter(deps: SessionDetailDeps): Router {
  const router = Router();
  router.get('/api/v1/sessions/:id', authenticate(deps.db), requireRole('developer'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const state = await sessionState(deps, row.session_id);
    const lock = await deps.db
      .selectFrom('session_locks')
      .select('reason')
      .where('session_id', '=', row.session_id)
      .executeTakeFirst();
    const keys = await deps.artifacts.list(`sessions/${row.session_id}/`);
    const artifacts = await Promise.all(
      keys.map(async (key) => ({ key, url: await deps.artifacts.presignGet(key, deps.presignTtlSeconds) })),
    );
    res.json({
      session_id: row.session_id,
      repository_url: row.repository_url,
      cloud: row.cloud,
      scope_id: row.scope_id,
      iac_path: row.iac_path,
      state_project_id: row.state_project_id,
      created_at: row.created_at,
      status: state.status,
      locked: lock !== undefined,
      branch: state.branch,
      in_flight: state.in_flight,
      rounds: state.rounds,
      artifacts,
      artifacts_expire_in_seconds: deps.presignTtlSeconds,
    });
  });

  router.post(
    '/api/v1/sessions/:id/apply',
    authenticate(deps.db),
    requireRole('devops'),
    async (req, res) => {
      const row = await ownSession(deps, req, req.params.id as string);
      const round_id = newRoundId();
      await submit(deps, row.session_id, { round_id, kind: 'apply', actor_uuid: currentUser(req).user_uuid });
      res
        .status(202)
        .location(`/api/v1/sessions/${row.session_id}`)
        .json({ session_id: row.session_id, round_id });
    },
  );
  return router;
}
