// GET /api/v1/sessions/{id}: the session detail — scope, state project id, status, rounds,
// reports and artifacts with presigned URLs that expire — read from the metadata store, so a
// finished session (its workflow closed, or dropped by retention) answers like a running one.
// POST /api/v1/sessions/{id}/apply: 202; the session workflow fails it in the background when no
// plan is pinned.
import { Router } from 'express';
import { parseBody } from '../validation';
import { reuseMargin, type ArtifactStore } from '../../shared/infra/object-store';
import { sessionArtifacts } from '../../shared/infra/db/artifacts';
import {
  listSessions,
  recordPlanApproval,
  sessionLock,
  sessionPullRequest,
  sessionRounds,
} from '../../shared/infra/db/sessions';
import { HttpError } from '../errors';
import {
  approvalSchema,
  revertableSchema,
  revertBodySchema,
  revertText,
  sessionDetailSchema,
  sessionListQuerySchema,
  sessionListSchema,
  type SessionDetail,
} from '../../shared/contracts';
import { z } from 'zod';
import { operation, route, sessionIdParam } from '../contract';
import { revertableAddresses } from '../revert';
import { authenticate, currentUser, requireRole } from '../auth';
import { mayFetchArtifact } from '../artifact-access';
import { requireAuthorized } from '../authz';
import type { Role } from '../../shared/infra/db/users';
import {
  acceptedBody,
  newRoundId,
  ownSession,
  submitOperation,
  type SessionRouteDeps,
  acceptedAnswer,
} from '../session-operations';

export interface SessionDetailDeps extends SessionRouteDeps {
  artifacts: ArtifactStore;
  presignTtlSeconds: number;
}

interface CachedDetail {
  organization_uuid: string;
  /** When the first of its presigned URLs expires (epoch ms). */
  expiresAt: number;
  body: Omit<SessionDetail, 'artifacts_expire_in_seconds'>;
}

/** The detail as `role` may see it: raw plans and plan JSON only for devops and admin. */
function served(d: CachedDetail, role: Role): SessionDetail {
  return {
    ...d.body,
    artifacts: d.body.artifacts.filter((a) => mayFetchArtifact(a.key, role)),
    artifacts_expire_in_seconds: Math.floor((d.expiresAt - Date.now()) / 1000),
  };
}

/**
 * Session details read from the store, dropped when a notification says the session changed (its
 * rounds, status, events, lock, pull request or artifacts) and all at once when notifications may
 * have been missed. A read that a change overtook is not kept (generations).
 */
class DetailCache {
  private readonly entries = new Map<string, CachedDetail>();
  private readonly generations = new Map<string, number>();
  private epoch = 0;

  generation(id: string): string {
    return `${this.epoch}:${this.generations.get(id) ?? 0}`;
  }

  get(id: string): CachedDetail | undefined {
    return this.entries.get(id);
  }

  set(id: string, d: CachedDetail, generation: string): void {
    if (generation !== this.generation(id)) return;
    this.entries.delete(id);
    this.entries.set(id, d);
    for (const old of this.entries.keys()) {
      if (this.entries.size <= 5_000) break;
      this.entries.delete(old);
    }
  }

  changed(id: string | null): void {
    if (id === null) {
      this.epoch += 1;
      this.entries.clear();
      this.generations.clear();
      return;
    }
    this.entries.delete(id);
    this.generations.set(id, (this.generations.get(id) ?? 0) + 1);
    if (this.generations.size > 50_000) {
      this.epoch += 1;
      this.generations.clear();
    }
  }
}

/** The operations of this module: each registered below from its declaration (api/contract.ts). */
export const sessionOperations = {
  list: operation({
    method: 'get',
    path: '/api/v1/sessions',
    summary:
      "The organization's sessions, newest first, with status and last outcome (developer); `limit` (≤ 100) and `before` (the previous page's `next`)",
    query: sessionListQuerySchema,
    responses: { 200: { description: 'A page of sessions', schema: sessionListSchema } },
    errors: [400, 401, 403],
  }),
  detail: operation({
    method: 'get',
    path: '/api/v1/sessions/:id',
    summary: 'Session detail (developer)',
    params: sessionIdParam,
    responses: { 200: { description: 'The session', schema: sessionDetailSchema } },
    errors: [401, 403, 404, 503],
  }),
  apply: operation({
    method: 'post',
    path: '/api/v1/sessions/:id/apply',
    summary:
      'Apply the pinned plan (devops); with orchestration.apply_requires_approval, 409 approval_required until a second person approved it',
    params: sessionIdParam,
    responses: { 202: acceptedAnswer() },
    errors: [401, 403, 404, 409],
  }),
  revertable: operation({
    method: 'get',
    path: '/api/v1/sessions/:id/revertable',
    summary:
      "The addresses a revert may name (developer): the drift the session's latest drift round left — its report's unreconciled and whitelisted drift and its final plan's",
    params: sessionIdParam,
    responses: { 200: { description: 'The revertable addresses', schema: revertableSchema } },
    errors: [401, 403, 404],
  }),
  revert: operation({
    method: 'post',
    path: '/api/v1/sessions/:id/revert',
    summary:
      'Revert (devops): the cloud follows the code for these addresses — a generate round that pins a plan targeted at exactly them, with no change to the code; then audit and apply as any pinned plan. Only drift the session found (400 otherwise).',
    params: sessionIdParam,
    body: revertBodySchema,
    responses: {
      202: acceptedAnswer({ addresses: z.array(z.string()) }, 'Accepted, with the addresses it reverts'),
    },
    errors: [400, 401, 403, 404],
  }),
  approve: operation({
    method: 'post',
    path: '/api/v1/sessions/:id/approve',
    summary:
      'Approve the pinned plan, by its SHA-256 (devops; not the person who pinned it): the second pair of eyes apply may require',
    params: sessionIdParam,
    responses: { 200: { description: 'The recorded approval', schema: approvalSchema } },
    errors: [401, 403, 404, 409],
  }),
};

/** With a hub, a session's detail is kept in memory until the store says the session changed. */
export function createSessionsRouter(deps: SessionDetailDeps): Router {
  const router = Router();
  const details = new DetailCache();
  deps.hub?.onChange((sessionId) => details.changed(sessionId));
  // The caller's organization's sessions, newest first, a page at a time, with the last outcome.
  route(router, sessionOperations.list, authenticate(deps.db), requireRole('developer'), async (req, res) => {
    const q = parseBody(sessionListQuerySchema, req.query);
    res.json(await listSessions(deps.db, currentUser(req).organization_uuid, q));
  });

  route(
    router,
    sessionOperations.detail,
    authenticate(deps.db),
    requireRole('developer'),
    async (req, res) => {
      const id = req.params.id as string;
      const user = currentUser(req);
      const hit = deps.hub?.connected ? details.get(id) : undefined;
      if (
        hit &&
        hit.organization_uuid === user.organization_uuid &&
        hit.expiresAt - Date.now() > reuseMargin(deps.presignTtlSeconds)
      ) {
        res.json(served(hit, user.role));
        return;
      }
      const generation = details.generation(id);
      const row = await ownSession(deps, req, id);
      const [rounds, lock, pr, keys] = await Promise.all([
        sessionRounds(deps.db, row.session_id),
        sessionLock(deps.db, row.session_id),
        sessionPullRequest(deps.db, row.session_id),
        sessionArtifacts(deps.db, row.session_id),
      ]);
      // Sessions from before the artifact index (migration 0008) list the object store once more.
      const listed =
        keys.length === 0 && rounds.length > 0
          ? await deps.artifacts.list(`sessions/${row.session_id}/`)
          : keys;
      const signed = await Promise.all(
        listed.map(async (key) => ({
          key,
          ...(await deps.artifacts.presignReused(key, deps.presignTtlSeconds)),
        })),
      );
      const detail: CachedDetail = {
        organization_uuid: row.organization_uuid,
        expiresAt: signed.reduce(
          (min, a) => Math.min(min, a.expiresAt),
          Date.now() + deps.presignTtlSeconds * 1000,
        ),
        body: {
          session_id: row.session_id,
          repository_url: row.repository_url,
          cloud: row.cloud as SessionDetail['cloud'],
          scope_id: row.scope_id,
          iac_path: row.iac_path,
          state_project_id: row.state_project_id,
          created_at: new Date(row.created_at).toISOString(),
          status: row.status,
          locked: lock !== undefined,
          lock_reason: lock ? lock.reason : null,
          /** `admin` or `plan` (a pinned plan's lock, cleared by its apply). */
          lock_kind: lock ? lock.kind : null,
          /** The plan a generate round pinned — hash, commit, state serial — and its impact banner. */
          pinned_plan: row.pinned_plan ?? null,
          /** An admin's override of the pinned plan's compliance findings, with the reason. */
          compliance_override: row.compliance_override ?? null,
          // Only an approval of the plan pinned now counts.
          plan_approval:
            row.plan_approval && row.pinned_plan && row.plan_approval.sha256 === row.pinned_plan.sha256
              ? row.plan_approval
              : null,
          approval_required: deps.orchestration.apply_requires_approval ?? false,
          branch: row.branch,
          in_flight: row.in_flight,
          rounds,
          pull_request: pr ?? null,
          artifacts: signed.map(({ key, url }) => ({ key, url })),
        },
      };
      if (deps.hub?.connected) details.set(id, detail, generation);
      res.json(served(detail, user.role));
    },
  );

  route(router, sessionOperations.apply, authenticate(deps.db), requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await requireAuthorized(deps.authz, req, 'sessions.apply', row);
    // Four eyes: a pinned plan is applied only once a second person approved that very plan. (No
    // pinned plan: the seed's contract — accepted, then the round fails with its message.)
    if (
      deps.orchestration.apply_requires_approval &&
      row.pinned_plan &&
      row.plan_approval?.sha256 !== row.pinned_plan.sha256
    )
      throw new HttpError(
        409,
        'approval_required',
        'Applying needs a second devops or admin to approve the pinned plan first (POST /api/v1/sessions/{id}/approve).',
      );
    const round_id = newRoundId();
    const outcome = await submitOperation(deps, row, {
      round_id,
      kind: 'apply',
      actor_uuid: currentUser(req).user_uuid,
      // What the caller saw approved: the session's workflow applies only that very plan.
      ...(row.plan_approval
        ? { approval: { sha256: row.plan_approval.sha256, by: row.plan_approval.by } }
        : {}),
    });
    res
      .status(202)
      .location(`/api/v1/sessions/${row.session_id}`)
      .json(acceptedBody(row.session_id, round_id, outcome));
  });

  // The drift this session found that a revert may name (its latest drift round's).
  route(
    router,
    sessionOperations.revertable,
    authenticate(deps.db),
    requireRole('developer'),
    async (req, res) => {
      const row = await ownSession(deps, req, req.params.id as string);
      res.json({ addresses: await revertableAddresses(deps.db, deps.artifacts, row.session_id) });
    },
  );

  // Revert: the cloud follows the code for drift this session found. A generate round with no
  // change to the code: it pins a plan targeted at exactly these addresses (audited, locking).
  route(router, sessionOperations.revert, authenticate(deps.db), requireRole('devops'), async (req, res) => {
    const { addresses } = parseBody(revertBodySchema, req.body);
    const row = await ownSession(deps, req, req.params.id as string);
    await requireAuthorized(deps.authz, req, 'sessions.revert', row);
    const allowed = await revertableAddresses(deps.db, deps.artifacts, row.session_id);
    const wanted = [...new Set(addresses)];
    const unknown = wanted.filter((a) => !allowed.includes(a));
    if (unknown.length > 0)
      throw new HttpError(
        400,
        'invalid_request',
        allowed.length === 0
          ? `addresses: session ${row.session_id} has no drift to revert (run a drift round first).`
          : `addresses: ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not drift this session found; it found ${allowed.join(', ')}.`,
      );
    const round_id = newRoundId();
    const outcome = await submitOperation(deps, row, {
      round_id,
      kind: 'generate',
      text: revertText(wanted),
      revert: wanted,
      actor_uuid: currentUser(req).user_uuid,
    });
    res
      .status(202)
      .location(`/api/v1/sessions/${row.session_id}`)
      .json({ ...acceptedBody(row.session_id, round_id, outcome), addresses: wanted });
  });

  // A second person approves the pinned plan (its hash): devops or admin, not who pinned it.
  route(router, sessionOperations.approve, authenticate(deps.db), requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await requireAuthorized(deps.authz, req, 'sessions.approve', row);
    const user = currentUser(req);
    const pinned = row.pinned_plan;
    if (!pinned) throw new HttpError(409, 'no_pinned_plan', 'No plan is pinned for this session.');
    // Who started the round that pinned it (recorded with the plan); for a plan pinned before that
    // was recorded, the plan's lock, else the session's creator.
    const lock = await sessionLock(deps.db, row.session_id);
    const pinnedBy = pinned.pinned_by ?? (lock?.kind === 'plan' ? lock.locked_by : row.created_by);
    if (pinnedBy === user.user_uuid)
      throw new HttpError(
        403,
        'own_plan',
        'You pinned this plan (you started its generate round); another devops or admin approves it.',
      );
    const approval = {
      sha256: pinned.sha256,
      by: user.user_uuid,
      name: user.name,
      at: new Date().toISOString(),
    };
    await recordPlanApproval(deps.db, row.session_id, approval);
    deps.hub?.changed(row.session_id);
    res.json({ session_id: row.session_id, plan_approval: approval });
  });
  return router;
}
