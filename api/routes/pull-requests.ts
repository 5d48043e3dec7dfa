// A session's pull request. Creating and merging it are session operations: the route answers 202
// and the session workflow does the work (the small model writes title and description, the forge
// opens it; the merge is refused while an admin holds the session's lock, and a drift session ends
// there). What the forge answered (number, URL, state) is recorded by the workflow; reading it
// changes nothing. On the embedded git host, which is no forge, the pull request is a reviewed
// branch merge: it has no number and no page.
import { pullRequestRecordSchema } from '../../shared/contracts';
import { operation, route, sessionIdParam } from '../contract';
import { Router } from 'express';
import { SessionRefusals } from '../../shared/contracts';
import { sessionLock, sessionPullRequest, sessionRounds } from '../../shared/infra/db/sessions';
import { authenticate, currentUser, requireRole } from '../auth';
import { requireAuthorized } from '../authz';
import { HttpError } from '../errors';
import {
  acceptedBody,
  newRoundId,
  ownSession,
  submitOperation,
  type OperationOutcome,
  type SessionRouteDeps,
  acceptedAnswer,
} from '../session-operations';

const REFUSAL_CODES: Record<string, string> = {
  [SessionRefusals.Busy]: 'operation_in_flight',
  [SessionRefusals.Finished]: 'session_finished',
  [SessionRefusals.NothingToPropose]: 'nothing_to_propose',
};

/** A pull-request operation the session refused is a 409: the caller can act on it. */
function refusedIs409(outcome: OperationOutcome): void {
  if (!outcome.accepted) {
    throw new HttpError(409, REFUSAL_CODES[outcome.refusal] ?? 'refused', outcome.reason);
  }
}

/** The pull-request operations, each registered below from its declaration (api/contract.ts). */
export const pullRequestOperations = {
  open: operation({
    method: 'post',
    path: '/api/v1/sessions/:id/pull-request',
    summary:
      'Open the pull request of the session branch (devops): a session operation; the session workflow has the small model write title and description and the forge open it (on the embedded git host: a reviewed branch merge, no number, no URL)',
    params: sessionIdParam,
    responses: {
      202: acceptedAnswer({}, undefined, '/api/v1/sessions/:id/pull-request'),
      200: { description: 'Already open: the recorded pull request', schema: pullRequestRecordSchema },
    },
    errors: [401, 403, 404, 409],
  }),
  read: operation({
    method: 'get',
    path: '/api/v1/sessions/:id/pull-request',
    summary: 'The pull request as the forge answered it (developer); reading it changes nothing',
    params: sessionIdParam,
    responses: { 200: { description: 'The pull request', schema: pullRequestRecordSchema } },
    errors: [401, 403, 404],
  }),
  merge: operation({
    method: 'post',
    path: '/api/v1/sessions/:id/merge',
    summary: 'Merge the pull request (devops); 409 while the session is locked',
    params: sessionIdParam,
    responses: { 202: acceptedAnswer() },
    errors: [401, 403, 404, 409],
  }),
};

export function createPullRequestRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  route(router, pullRequestOperations.open, auth, requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await requireAuthorized(deps.authz, req, 'pull_request.open', row);
    const existing = await sessionPullRequest(deps.db, row.session_id);
    if (existing) {
      res.status(200).json(existing);
      return;
    }
    const rounds = await sessionRounds(deps.db, row.session_id);
    if (
      !rounds.some(
        (r) =>
          (r.kind === 'partial' || r.kind === 'full' || r.kind === 'generate') && r.status === 'completed',
      )
    ) {
      throw new HttpError(
        409,
        'nothing_to_propose',
        'The session branch has no changes yet: no round of this session completed with changes.',
      );
    }
    const round_id = newRoundId();
    const outcome = await submitOperation(deps, row, {
      round_id,
      kind: 'pull_request',
      actor_uuid: currentUser(req).user_uuid,
    });
    refusedIs409(outcome);
    res
      .status(202)
      .location(`/api/v1/sessions/${row.session_id}/pull-request`)
      .json(acceptedBody(row.session_id, round_id, outcome));
  });

  route(router, pullRequestOperations.merge, auth, requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    await requireAuthorized(deps.authz, req, 'pull_request.merge', row);
    const lock = await sessionLock(deps.db, row.session_id);
    if (lock) {
      throw new HttpError(
        409,
        'locked',
        lock.kind === 'plan'
          ? `Session ${row.session_id} is locked: ${lock.reason}`
          : `Session ${row.session_id} is locked; merging is blocked until an admin clears the lock.`,
      );
    }
    const pr = await sessionPullRequest(deps.db, row.session_id);
    if (!pr) throw new HttpError(409, 'no_pull_request', 'Create the pull request before merging it.');
    if (pr.status === 'merged') {
      throw new HttpError(
        409,
        'already_merged',
        `The pull request of session ${row.session_id} is already merged.`,
      );
    }
    const round_id = newRoundId();
    const outcome = await submitOperation(deps, row, {
      round_id,
      kind: 'merge',
      text:
        pr.number !== null
          ? `Merge pull request #${pr.number}: ${pr.title}`
          : `Merge ${pr.head}: ${pr.title}`,
      actor_uuid: currentUser(req).user_uuid,
      pull_request: { provider: pr.provider, number: pr.number },
    });
    refusedIs409(outcome);
    res
      .status(202)
      .location(`/api/v1/sessions/${row.session_id}`)
      .json(acceptedBody(row.session_id, round_id, outcome));
  });

  route(router, pullRequestOperations.read, auth, requireRole('developer'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const pr = await sessionPullRequest(deps.db, row.session_id);
    if (!pr) throw new HttpError(404, 'not_found', 'This session has no pull request.');
    res.json(pr);
  });
  return router;
}
