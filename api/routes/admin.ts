// The admin panel's routes (admin role, own organization): the sessions, as Temporal visibility
// lists them, and the users. Locks are in routes/pull-requests.ts, next to the merge they block.
import { Router } from 'express';
import { authenticate, currentUser, requireRole } from '../auth';
import type { SessionRouteDeps } from './drift';

export function createAdminRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  router.get('/api/v1/admin/sessions', auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    const rows = await deps.db
      .selectFrom('sessions')
      .select(['session_id', 'repository_url', 'cloud', 'iac_path', 'created_at'])
      .where('organization_uuid', '=', user.organization_uuid)
      .orderBy('created_at', 'desc')
      .limit(500)
      .execute();
    const mine = new Map(rows.map((r) => [r.session_id, r]));
    const sessions = [];
    for await (const wf of deps.client.workflow.list({ query: `WorkflowType = 'session'` })) {
      const id = wf.workflowId.replace(/^session:/, '');
      const row = mine.get(id);
      if (!row) continue;
      sessions.push({
        ...row,
        workflow_id: wf.workflowId,
        workflow_status: wf.status.name,
        started_at: wf.startTime,
      });
      if (sessions.length >= 500) break;
    }
    res.json({ sessions });
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
  return router;
}
