// Pull requests of a session, on the embedded git host: create (title and description by the
// small model, from the session branch) and merge (a real merge and push, run by the session
// workflow; refused while the session is locked; a drift session ends there). Admins list, set
// and clear session locks.
import { Router } from 'express';
import type { GitHubPullRequests } from '../../activities/github';
import type { ModelProvider } from '../../activities/model/port';
import { authenticate, currentUser, requireRole } from '../auth';
import { HttpError } from '../errors';
import { newRoundId, ownSession, sessionState, submit } from './drift';
import type { SessionDetailDeps } from './sessions';

export interface PullRequestDeps extends SessionDetailDeps {
  model: ModelProvider;
  /** Hosts served by GitHub, and the client to use there (absent without GIT_TOKEN). */
  github?: { hosts: string[]; client?: GitHubPullRequests };
}

export function createPullRequestRouter(deps: PullRequestDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  router.post('/api/v1/sessions/:id/pull-request', auth, requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const existing = await deps.db
      .selectFrom('pull_requests')
      .selectAll()
      .where('session_id', '=', row.session_id)
      .executeTakeFirst();
    if (existing) {
      res.status(200).json(existing);
      return;
    }
    const state = await sessionState(deps, row.session_id);
    if (!state.rounds.some((r) => (r.kind === 'partial' || r.kind === 'full') && r.status === 'completed')) {
      throw new HttpError(
        409,
        'nothing_to_propose',
        'The session branch has no changes yet: no round of this session completed with changes.',
      );
    }
    const base = 'main';
    const text = await deps.model.pullRequest({
      session_id: row.session_id,
      repository_url: row.repository_url,
      head: state.branch,
      base,
      rounds: state.rounds.map((r) => ({
        round_id: r.round_id,
        kind: r.kind,
        ...(r.text ? { text: r.text } : {}),
        ...(r.outcome ? { outcome: r.outcome } : {}),
        ...(r.summary ? { summary: r.summary } : {}),
      })),
    });
    const others = await deps.db
      .selectFrom('pull_requests')
      .innerJoin('sessions', 'sessions.session_id', 'pull_requests.session_id')
      .select(deps.db.fn.countAll<string>().as('n'))
      .where('sessions.repository_url', '=', row.repository_url)
      .executeTakeFirstOrThrow();
    let number = Number(others.n) + 1;
    let url = `${row.repository_url.replace(/\.git$/, '')}/pulls/${number}`;
    let provider: 'local' | 'github' = 'local';
    if (deps.github?.hosts.includes(new URL(row.repository_url).hostname)) {
      if (!deps.github.client) {
        throw new HttpError(
          409,
          'no_git_token',
          'GIT_TOKEN is not set on the API: it cannot open a pull request on GitHub.',
        );
      }
      const opened = await deps.github.client.open({
        repositoryUrl: row.repository_url,
        head: state.branch,
        base,
        title: text.title,
        body: text.description,
      });
      ({ number, url } = opened);
      provider = 'github';
    }
    const pr = {
      session_id: row.session_id,
      provider,
      number,
      title: text.title,
      description: text.description,
      head: state.branch,
      base,
      url,
      status: 'open' as const,
      merge_commit: null,
      merged_at: null,
    };
    await deps.db.insertInto('pull_requests').values(pr).execute();
    res.status(201).json(pr);
  });

  router.post('/api/v1/sessions/:id/merge', auth, requireRole('devops'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const lock = await deps.db
      .selectFrom('session_locks')
      .selectAll()
      .where('session_id', '=', row.session_id)
      .executeTakeFirst();
    if (lock) {
      throw new HttpError(
        409,
        'locked',
        `Session ${row.session_id} is locked; merging is blocked until an admin clears the lock.`,
      );
    }
    const pr = await deps.db
      .selectFrom('pull_requests')
      .selectAll()
      .where('session_id', '=', row.session_id)
      .executeTakeFirst();
    if (!pr) throw new HttpError(409, 'no_pull_request', 'Create the pull request before merging it.');
    if (pr.status === 'merged')
      throw new HttpError(409, 'already_merged', `Pull request #${pr.number} is already merged.`);
    const round_id = newRoundId();
    await submit(deps, row.session_id, {
      round_id,
      kind: 'merge',
      text: `Merge pull request #${pr.number}: ${pr.title}`,
      actor_uuid: currentUser(req).user_uuid,
      pull_request: { provider: pr.provider === 'github' ? 'github' : 'local', number: pr.number },
    });
    res
      .status(202)
      .location(`/api/v1/sessions/${row.session_id}`)
      .json({ session_id: row.session_id, round_id });
  });

  router.get('/api/v1/sessions/:id/pull-request', auth, requireRole('developer'), async (req, res) => {
    const row = await ownSession(deps, req, req.params.id as string);
    const pr = await deps.db
      .selectFrom('pull_requests')
      .selectAll()
      .where('session_id', '=', row.session_id)
      .executeTakeFirst();
    if (!pr) throw new HttpError(404, 'not_found', 'This session has no pull request.');
    if (pr.status === 'open') {
      // The merge runs in the session workflow: record it here once the session says it is done.
      const state = await sessionState(deps, row.session_id);
      const merge = state.rounds.find((r) => r.kind === 'merge' && r.status === 'completed');
      if (state.status === 'MERGED' && merge?.commit) {
        await deps.db
          .updateTable('pull_requests')
          .set({ status: 'merged', merge_commit: merge.commit, merged_at: new Date() })
          .where('session_id', '=', row.session_id)
          .execute();
        res.json({ ...pr, status: 'merged', merge_commit: merge.commit });
        return;
      }
    }
    res.json(pr);
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
    const body = (req.body ?? {}) as { reason?: unknown };
    const reason = typeof body.reason === 'string' ? body.reason.slice(0, 500) : '';
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
