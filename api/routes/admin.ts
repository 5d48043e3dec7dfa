// The admin panel's routes (admin role, own organization): the sessions with their status and
// workflow, the users, and the session locks that block merging.
import { Router } from 'express';
import { z } from 'zod';
import { authenticate, currentUser, requireRole } from '../auth';
import { ownSession, type SessionRouteDeps } from '../session-operations';
import { sessionWorkflowId } from '../../shared/ids';
import { parseBody } from '../validation';

/** Why an admin locks a session: shown to whoever is refused the merge. */
const lockRequestSchema = z.object({ reason: z.string().trim().max(500).default('') }).strict();

export function createAdminRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  router.get('/api/v1/admin/sessions', auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    const rows = await deps.db
      .selectFrom('sessions')
      .select([
        'session_id',
        'repository_url',
        'cloud',
        'iac_path',
        'status',
        'in_flight',
        'created_at',
        'updated_at',
      ])
      .where('organization_uuid', '=', user.organization_uuid)
      .orderBy('created_at', 'desc')
      .limit(500)
      .execute();
    res.json({ sessions: rows.map((r) => ({ ...r, workflow_id: sessionWorkflowId(r.session_id) })) });
  });

  router.get('/api/v1/admin/users', auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    const users = await deps.db
      .selectFrom('users')
      .select(['user_uuid', 'name', 'role', 'created_at'])
      .where('organization_uuid', '=', user.organization_uuid)
      .orderBy('name')
      .execute();
    res.json({ users });
  });

  router.get('/api/v1/admin/locks', auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    const locks = await deps.db
      .selectFrom('session_locks')
      .innerJoin('sessions', 'sessions.session_id', 'session_locks.session_id')
      .select([
        'session_locks.session_id',
        'session_locks.locked_by',
        'session_locks.reason',
        'session_locks.locked_at',
      ])
      .where('sessions.organization_uuid', '=', user.organization_uuid)
      .execute();
    res.json({ locks });
  });

  router.put('/api/v1/admin/sessions/:id/lock', auth, requireRole('admin'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const { reason } = parseBody(lockRequestSchema, req.body ?? {});
    await deps.db
      .insertInto('session_locks')
      .values({ session_id: row.session_id, locked_by: currentUser(req).user_uuid, reason })
      .onConflict((oc) => oc.column('session_id').doUpdateSet({ reason }))
      .execute();
    res.json({ session_id: row.session_id, locked: true, reason });
  });

  router.delete('/api/v1/admin/sessions/:id/lock', auth, requireRole('admin'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await deps.db.deleteFrom('session_locks').where('session_id', '=', row.session_id).execute();
    res.json({ session_id: row.session_id, locked: false });
  });
  return router;
}
