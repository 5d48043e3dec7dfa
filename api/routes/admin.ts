// The admin panel's routes (admin role, own organization): the sessions with their status and
// workflow, the users (create with a role — the token shown once —, change a role, revoke or reissue
// a token), the session locks that block merging, and the organization's git connections (the
// hosts its repository URLs may name, with its own sealed credential for each).
import { Router, type Request } from 'express';
import { z } from 'zod';
import { authenticate, currentUser, requireRole, USERS_CHANGED } from '../auth';
import { ownSession, type SessionRouteDeps } from '../session-operations';
import { sessionWorkflowId } from '../../shared/ids';
import { parseBody, uuidParam } from '../validation';
import {
  adminLockListSchema,
  adminSessionListSchema,
  adminUserListSchema,
  complianceOverrideSchema,
  createdUserSchema,
  gitConnectionListSchema,
  gitConnectionSchema,
  gitConnectionViewSchema,
  lockClearedSchema,
  lockSetSchema,
  roleChangedSchema,
  tokenIssuedSchema,
  tokenRevokedSchema,
} from '../../shared/contracts';
import { operation, route, sessionIdParam } from '../contract';
import {
  createGitConnection,
  deleteGitConnection,
  GitConnectionConflict,
  listGitConnections,
} from '../../shared/infra/db/git-connections';
import { requireAllowedTarget } from '../targets';
import { HttpError } from '../errors';
import {
  adminSessions,
  lockSession,
  notifySessionChanged,
  organizationLocks,
  recordComplianceOverride,
  unlockSession,
} from '../../shared/infra/db/sessions';
import {
  createUserInOrganization,
  findUserInOrganization,
  issueUserToken,
  listUsers,
  revokeUserToken,
  ROLES,
  setUserRole,
} from '../../shared/infra/db/users';

/** Why an admin locks a session: shown to whoever is refused the merge. */
export const newUserSchema = z
  .object({
    name: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._@-]+$/, 'letters, digits, ".", "_", "@" and "-" only'),
    role: z.enum(ROLES),
  })
  .strict();
export const roleChangeSchema = z.object({ role: z.enum(ROLES) }).strict();

export const lockRequestSchema = z.object({ reason: z.string().trim().max(500).default('') }).strict();

/** An override always says why. */
export const overrideRequestSchema = z
  .object({ reason: z.string().trim().min(1, 'must say why').max(500) })
  .strict();

const userId = { id: z.uuid().describe('The user') };

/** The admin panel's operations, each registered below from its declaration (api/contract.ts). */
export const adminOperations = {
  sessions: operation({
    method: 'get',
    path: '/api/v1/admin/sessions',
    summary: "The organization's sessions with their status, operation in flight and workflow id (admin)",
    responses: { 200: { description: 'The sessions', schema: adminSessionListSchema } },
    errors: [401, 403],
  }),
  users: operation({
    method: 'get',
    path: '/api/v1/admin/users',
    summary: "The organization's users (admin): name, role, when created, whether the token is revoked",
    responses: { 200: { description: 'The users', schema: adminUserListSchema } },
    errors: [401, 403],
  }),
  createUser: operation({
    method: 'post',
    path: '/api/v1/admin/users',
    summary:
      'Create a user in your organization with a role (admin); the token is in this answer only. 409 when the name is taken.',
    body: newUserSchema,
    responses: { 201: { description: 'The user and its token', schema: createdUserSchema } },
    errors: [400, 401, 403, 409],
  }),
  changeRole: operation({
    method: 'patch',
    path: '/api/v1/admin/users/:id',
    summary: "Change a user's role (admin); not your own (409)",
    params: userId,
    body: roleChangeSchema,
    responses: { 200: { description: 'The user with its new role', schema: roleChangedSchema } },
    errors: [400, 401, 403, 404, 409],
  }),
  revokeToken: operation({
    method: 'delete',
    path: '/api/v1/admin/users/:id/token',
    summary: "Revoke a user's token and browser sessions (admin); their event streams end at once",
    params: userId,
    responses: { 200: { description: 'Revoked', schema: tokenRevokedSchema } },
    errors: [401, 403, 404, 409],
  }),
  issueToken: operation({
    method: 'post',
    path: '/api/v1/admin/users/:id/token',
    summary: 'Issue a user a new token (admin); shown in this answer only',
    params: userId,
    responses: { 201: { description: 'The new token', schema: tokenIssuedSchema } },
    errors: [401, 403, 404, 409],
  }),
  locks: operation({
    method: 'get',
    path: '/api/v1/admin/locks',
    summary: "The organization's session locks (admin)",
    responses: { 200: { description: 'The locks', schema: adminLockListSchema } },
    errors: [401, 403],
  }),
  lock: operation({
    method: 'put',
    path: '/api/v1/admin/sessions/:id/lock',
    summary: 'Lock a session: merging is blocked until an admin clears it (admin)',
    params: sessionIdParam,
    body: lockRequestSchema,
    responses: { 200: { description: 'Locked', schema: lockSetSchema } },
    errors: [400, 401, 403, 404],
  }),
  override: operation({
    method: 'post',
    path: '/api/v1/admin/sessions/:id/compliance-override',
    summary:
      "Override the pinned plan's deny-level compliance findings with a reason (admin); its apply may then run, the reason heading the apply log",
    params: sessionIdParam,
    body: overrideRequestSchema,
    responses: { 200: { description: 'The recorded override', schema: complianceOverrideSchema } },
    errors: [400, 401, 403, 404, 409],
  }),
  unlock: operation({
    method: 'delete',
    path: '/api/v1/admin/sessions/:id/lock',
    summary: "Clear a session's lock (admin)",
    params: sessionIdParam,
    responses: { 200: { description: 'Unlocked', schema: lockClearedSchema } },
    errors: [401, 403, 404],
  }),
  gitConnections: operation({
    method: 'get',
    path: '/api/v1/admin/connections/git',
    summary:
      "The organization's git connections: the hosts its repository URLs may name (admin; never a credential)",
    responses: { 200: { description: 'The connections', schema: gitConnectionListSchema } },
    errors: [401, 403],
  }),
  connectGit: operation({
    method: 'post',
    path: '/api/v1/admin/connections/git',
    summary:
      "Connect a git host (admin): `{origin, kind?, credential?}`; the organization's own token for it is stored sealed and never returned. 409 when connected already.",
    body: gitConnectionSchema,
    responses: {
      201: {
        description: 'The connection',
        schema: gitConnectionViewSchema,
        location: '/api/v1/admin/connections/git/:id',
      },
    },
    errors: [400, 401, 403, 409],
  }),
  gitConnection: operation({
    method: 'get',
    path: '/api/v1/admin/connections/git/:id',
    summary: 'One of the organization’s git connections (admin; never its credential)',
    params: { id: z.uuid().describe('The git connection') },
    responses: { 200: { description: 'The connection', schema: gitConnectionViewSchema } },
    errors: [401, 403, 404],
  }),
  disconnectGit: operation({
    method: 'delete',
    path: '/api/v1/admin/connections/git/:id',
    summary: 'Remove one of the organization’s git connections (admin)',
    params: { id: z.uuid().describe('The git connection') },
    responses: { 204: { description: 'Removed' } },
    errors: [401, 403, 404],
  }),
};

export function createAdminRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  route(router, adminOperations.sessions, auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    const rows = await adminSessions(deps.db, user.organization_uuid);
    res.json({ sessions: rows.map((r) => ({ ...r, workflow_id: sessionWorkflowId(r.session_id) })) });
  });

  route(router, adminOperations.users, auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    res.json({ users: await listUsers(deps.db, user.organization_uuid) });
  });

  /** Every API process forgets the tokens it remembered (this one at once). */
  async function usersChanged(): Promise<void> {
    await notifySessionChanged(deps.db, USERS_CHANGED);
    deps.hub?.changed(USERS_CHANGED);
  }

  /** A user of the caller's organization, other than the caller (nobody locks themselves out). */
  async function otherUser(req: Request, id: string): Promise<{ user_uuid: string; name: string }> {
    const me = currentUser(req);
    const found = z.uuid().safeParse(id).success
      ? await findUserInOrganization(deps.db, me.organization_uuid, { user_uuid: id })
      : undefined;
    if (!found) throw new HttpError(404, 'not_found', `No user ${id} in this organization.`);
    if (found.user_uuid === me.user_uuid)
      throw new HttpError(409, 'own_account', 'You cannot change your own role or token; ask another admin.');
    return found;
  }

  route(router, adminOperations.createUser, auth, requireRole('admin'), async (req, res) => {
    const me = currentUser(req);
    const body = parseBody(newUserSchema, req.body);
    const taken = await findUserInOrganization(deps.db, me.organization_uuid, { name: body.name });
    if (taken)
      throw new HttpError(
        409,
        'name_taken',
        `A user named ${body.name} already exists in your organization.`,
      );
    const { user, token } = await createUserInOrganization(deps.db, {
      name: body.name,
      role: body.role,
      organization_uuid: me.organization_uuid,
    }).catch((err: unknown) => {
      // Two admins creating the same name at once: the unique index decides.
      if ((err as { code?: string }).code === '23505')
        throw new HttpError(
          409,
          'name_taken',
          `A user named ${body.name} already exists in your organization.`,
        );
      throw err;
    });
    // The token is in this response only; the store keeps its hash.
    res.status(201).json({ user: { user_uuid: user.user_uuid, name: user.name, role: user.role }, token });
  });

  route(router, adminOperations.changeRole, auth, requireRole('admin'), async (req, res) => {
    const body = parseBody(roleChangeSchema, req.body);
    const target = await otherUser(req, req.params.id as string);
    await setUserRole(deps.db, target.user_uuid, body.role);
    await usersChanged();
    res.json({ user_uuid: target.user_uuid, name: target.name, role: body.role });
  });

  route(router, adminOperations.revokeToken, auth, requireRole('admin'), async (req, res) => {
    const target = await otherUser(req, req.params.id as string);
    await revokeUserToken(deps.db, target.user_uuid);
    await usersChanged();
    res.json({ user_uuid: target.user_uuid, name: target.name, revoked: true });
  });

  route(router, adminOperations.issueToken, auth, requireRole('admin'), async (req, res) => {
    const target = await otherUser(req, req.params.id as string);
    const token = await issueUserToken(deps.db, target.user_uuid);
    await usersChanged();
    res.status(201).json({ user_uuid: target.user_uuid, name: target.name, token });
  });

  route(router, adminOperations.locks, auth, requireRole('admin'), async (req, res) => {
    const user = currentUser(req);
    res.json({ locks: await organizationLocks(deps.db, user.organization_uuid) });
  });

  route(router, adminOperations.lock, auth, requireRole('admin'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const { reason } = parseBody(lockRequestSchema, req.body ?? {});
    await lockSession(deps.db, row.session_id, currentUser(req).user_uuid, reason);
    deps.hub?.changed(row.session_id);
    res.json({ session_id: row.session_id, locked: true, reason });
  });

  // A pinned plan's deny-level compliance findings, overridden by an admin with a recorded reason:
  // its apply may then run (the reason heads the apply log).
  route(router, adminOperations.override, auth, requireRole('admin'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const { reason } = parseBody(overrideRequestSchema, req.body ?? {});
    const pinned = row.pinned_plan;
    if (!pinned) throw new HttpError(409, 'no_pinned_plan', 'No plan is pinned for this session.');
    if (!pinned.compliance || pinned.compliance.passed)
      throw new HttpError(
        409,
        'nothing_to_override',
        'The pinned plan has no deny-level compliance finding.',
      );
    const override = {
      round_id: pinned.round_id,
      reason,
      by: currentUser(req).user_uuid,
      at: new Date().toISOString(),
    };
    await recordComplianceOverride(deps.db, row.session_id, override);
    deps.hub?.changed(row.session_id);
    res.json({ session_id: row.session_id, compliance_override: override });
  });

  route(router, adminOperations.unlock, auth, requireRole('admin'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await unlockSession(deps.db, row.session_id);
    deps.hub?.changed(row.session_id);
    res.json({ session_id: row.session_id, locked: false });
  });

  route(router, adminOperations.gitConnections, auth, requireRole('admin'), async (req, res) => {
    res.json({ git_connections: await listGitConnections(deps.db, currentUser(req).organization_uuid) });
  });

  route(router, adminOperations.connectGit, auth, requireRole('admin'), async (req, res) => {
    const spec = parseBody(gitConnectionSchema, req.body);
    if (spec.credential !== undefined && !deps.secrets)
      throw new HttpError(
        400,
        'invalid_request',
        'credential: this installation stores no credentials (KUMOSS_SECRETS_KEY is not set on the API and worker)',
      );
    await requireAllowedTarget(deps.targets, 'origin', spec.origin);
    const user = currentUser(req);
    try {
      const created = await createGitConnection(deps.db, {
        organization_uuid: user.organization_uuid,
        origin: spec.origin,
        kind: spec.kind,
        credential: spec.credential,
        created_by: user.user_uuid,
        box: deps.secrets,
      });
      res.status(201).location(`/api/v1/admin/connections/git/${created.git_connection_uuid}`).json(created);
    } catch (err) {
      if (err instanceof GitConnectionConflict) throw new HttpError(409, 'conflict', err.message);
      throw err;
    }
  });

  route(router, adminOperations.gitConnection, auth, requireRole('admin'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Git connection');
    const found = (await listGitConnections(deps.db, currentUser(req).organization_uuid)).find(
      (c) => c.git_connection_uuid === id,
    );
    if (!found) throw new HttpError(404, 'not_found', `Git connection ${id} not found.`);
    res.json(found);
  });

  route(router, adminOperations.disconnectGit, auth, requireRole('admin'), async (req, res) => {
    const id = uuidParam(req.params.id, 'Git connection');
    if (!(await deleteGitConnection(deps.db, currentUser(req).organization_uuid, id)))
      throw new HttpError(404, 'not_found', `Git connection ${id} not found.`);
    res.status(204).end();
  });
  return router;
}
