// A session's pull request, run by the session workflow: the facts (rounds from the session store,
// the repository's default branch as the base), the title and description from the small model,
// opening it on the forge (GitHub; on the embedded git host, which is no forge, a reviewed branch
// merge) and merging it. Each step is safe to repeat: a recorded pull request is answered as it
// is, GitHub's pull request for the head branch is adopted, a branch already merged is not merged
// again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { PullRequestProvider, PullRequestRecord } from '../shared/contracts';
import type { Db } from '../shared/infra/db';
import { notifySessionChanged, sessionRounds } from '../shared/infra/db/sessions';
import { ErrorTypes } from '../shared/errors';
import type { GitAccess } from './git-access';
import type { GitClient } from './git';
import type { GiteaPullRequests } from './gitea';
import type { GitLabMergeRequests } from './gitlab';
import type { Forge } from './forge';
import type { GitHubPullRequests } from './github';
import type { ModelProvider, PullRequestFacts, PullRequestText } from './model/port';

export interface MergeInput {
  /** The session whose branch merges: its organization's credential (absent in older histories). */
  sessionId?: string;
  repositoryUrl: string;
  head: string;
  base?: string;
  message: string;
}

export interface PullRequestDeps {
  git: GitClient;
  /** Each session's credential for its repository (absent: `git` as given). */
  gitAccess?: GitAccess;
  db: Db;
  model: ModelProvider;
  github?: GitHubPullRequests;
  /** Repository hosts whose pull requests go through the GitHub REST API (services.github.hosts). */
  githubHosts?: string[];
  /** The Gitea server (services.gitea.url) and its client (absent without a token). */
  gitea?: { url: string; client?: GiteaPullRequests };
  /** Repository hosts served by GitLab (services.gitlab) and its client (absent without GIT_TOKEN). */
  gitlab?: { hosts: string[]; client?: GitLabMergeRequests };
}

export interface PullRequestTarget {
  sessionId: string;
  repositoryUrl: string;
  head: string;
}

type ForgeName = Exclude<PullRequestProvider, 'git_host'>;
const FORGE_TOKENS: Record<ForgeName, [string, string]> = {
  github: ['GIT_TOKEN', 'GitHub'],
  gitlab: ['GIT_TOKEN', 'GitLab'],
  gitea: ['GITEA_TOKEN', 'Gitea'],
};
const noToken = (forge: ForgeName, what: string) =>
  ApplicationFailure.nonRetryable(
    `${FORGE_TOKENS[forge][0]} is not set on the worker: it cannot ${what} on ${FORGE_TOKENS[forge][1]}`,
    ErrorTypes.InvalidInput,
  );

async function recorded(db: Db, sessionId: string): Promise<PullRequestRecord | undefined> {
  const row = await db
    .selectFrom('pull_requests')
    .selectAll()
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    session_id: row.session_id,
    provider: row.provider as PullRequestRecord['provider'],
    number: row.number,
    title: row.title,
    description: row.description,
    head: row.head,
    base: row.base,
    url: row.url,
    status: row.status,
    merge_commit: row.merge_commit,
  };
}

export function createPullRequestActivities(deps: PullRequestDeps) {
  const { git, db } = deps;
  /** Git for a session's repository, with its organization's credential for it. */
  const remote = async (sessionId: string | undefined, repositoryUrl: string): Promise<GitClient> =>
    deps.gitAccess && sessionId ? deps.gitAccess.forSession(sessionId, repositoryUrl) : git;
  const provider = (repositoryUrl: string): PullRequestProvider => {
    const url = new URL(repositoryUrl);
    if ((deps.githubHosts ?? []).includes(url.hostname)) return 'github';
    if ((deps.gitlab?.hosts ?? []).includes(url.hostname)) return 'gitlab';
    if (deps.gitea?.url && new URL(deps.gitea.url).host === url.host) return 'gitea';
    return 'git_host';
  };
  /**
   * The forge's client for a provider (the operator's token), or the failure that says which token
   * is missing — or that it does not serve the session's organization
   * (security.operator_git_credentials_for).
   */
  const forge = async (p: ForgeName, what: string, sessionId: string | undefined): Promise<Forge> => {
    const client = p === 'github' ? deps.github : p === 'gitlab' ? deps.gitlab?.client : deps.gitea?.client;
    if (!client) throw noToken(p, what);
    const org = deps.gitAccess && sessionId ? await deps.gitAccess.sessionOrganization(sessionId) : undefined;
    if (org && !(await deps.gitAccess?.mayUseOperatorTokens(org)))
      throw ApplicationFailure.nonRetryable(
        `Cannot ${what} on ${p}: this installation's ${p} token does not serve your organization (security.operator_git_credentials_for).`,
        ErrorTypes.ForgeRequestRejected,
      );
    return client;
  };

  /** The base of a pull request: the repository's default branch (the remote's HEAD). */
  async function defaultBranch(sessionId: string, repositoryUrl: string): Promise<string> {
    const p = provider(repositoryUrl);
    if (p !== 'git_host')
      return (await forge(p, 'read the default branch', sessionId)).defaultBranch(repositoryUrl);
    const out = await (
      await remote(sessionId, repositoryUrl)
    ).run(['ls-remote', '--symref', repositoryUrl, 'HEAD']);
    const m = /^ref: refs\/heads\/(\S+)\s+HEAD/m.exec(out);
    if (!m?.[1]) {
      throw ApplicationFailure.nonRetryable(
        `${repositoryUrl} has no default branch`,
        ErrorTypes.RepositoryNotFound,
      );
    }
    return m[1];
  }

  return {
    /** What the small model needs, and the pull request already recorded (a retried operation). */
    async pullRequestFacts(
      input: PullRequestTarget,
    ): Promise<{ facts: PullRequestFacts; existing: PullRequestRecord | null }> {
      const existing = (await recorded(db, input.sessionId)) ?? null;
      const base = existing?.base ?? (await defaultBranch(input.sessionId, input.repositoryUrl));
      const rounds = await sessionRounds(db, input.sessionId);
      return {
        existing,
        facts: {
          session_id: input.sessionId,
          repository_url: input.repositoryUrl,
          head: input.head,
          base,
          rounds: rounds
            .filter(
              (r) =>
                r.kind === 'partial' ||
                r.kind === 'full' ||
                (r.kind === 'generate' && r.status === 'completed'),
            )
            .map((r) => ({
              round_id: r.round_id,
              kind: r.kind,
              ...(r.text ? { text: r.text } : {}),
              ...(r.outcome ? { outcome: r.outcome } : {}),
              ...(r.summary ? { summary: r.summary } : {}),
            })),
        },
      };
    },

    /** Title and description, by the small model. */
    async writePullRequestText(facts: PullRequestFacts): Promise<PullRequestText> {
      return deps.model.pullRequest(facts);
    },

    /** Opens (or adopts) the pull request on the forge and records what the forge answered. */
    async openPullRequest(
      input: PullRequestTarget & { base: string; text: PullRequestText },
    ): Promise<PullRequestRecord> {
      const existing = await recorded(db, input.sessionId);
      if (existing) return existing;
      const where = provider(input.repositoryUrl);
      let number: number | null = null;
      let url: string | null = null;
      let status: PullRequestRecord['status'] = 'open';
      if (where !== 'git_host') {
        const opened = await (
          await forge(where, 'open a pull request', input.sessionId)
        ).open({
          repositoryUrl: input.repositoryUrl,
          head: input.head,
          base: input.base,
          title: input.text.title,
          body: input.text.description,
        });
        ({ number, url } = opened);
        if (opened.state === 'merged') status = 'merged';
      } else {
        const branches = await (
          await remote(input.sessionId, input.repositoryUrl)
        ).remoteBranches(input.repositoryUrl);
        if (!branches.has(input.head)) {
          throw ApplicationFailure.nonRetryable(
            `branch ${input.head} does not exist`,
            ErrorTypes.RepositoryNotFound,
          );
        }
      }
      const pr: PullRequestRecord = {
        session_id: input.sessionId,
        provider: where,
        number,
        title: input.text.title,
        description: input.text.description,
        head: input.head,
        base: input.base,
        url,
        status,
        merge_commit: null,
      };
      await db
        .insertInto('pull_requests')
        .values({ ...pr, merged_at: null })
        .onConflict((oc) => oc.column('session_id').doNothing())
        .execute();
      await notifySessionChanged(db, input.sessionId);
      return (await recorded(db, input.sessionId)) ?? pr;
    },

    /** Whether the session is locked — by an admin, or by a pinned plan — (merging is blocked while it is). */
    async sessionLock(input: {
      sessionId: string;
    }): Promise<{ locked: boolean; reason: string; kind?: 'admin' | 'plan' }> {
      const lock = await db
        .selectFrom('session_locks')
        .select(['reason', 'kind'])
        .where('session_id', '=', input.sessionId)
        .executeTakeFirst();
      return lock ? { locked: true, reason: lock.reason, kind: lock.kind } : { locked: false, reason: '' };
    },

    /** Records the merge of the session's pull request. */
    async recordPullRequestMerged(input: { sessionId: string; commit: string }): Promise<void> {
      await db
        .updateTable('pull_requests')
        .set({ status: 'merged', merge_commit: input.commit, merged_at: new Date() })
        .where('session_id', '=', input.sessionId)
        .execute();
      await notifySessionChanged(db, input.sessionId);
    },

    /** Merges the pull request on its forge; one already merged answers its merge commit. */
    async mergePullRequest(input: {
      /** The session whose pull request merges. */
      sessionId: string;
      provider: ForgeName;
      repositoryUrl: string;
      number: number;
      message: string;
    }): Promise<{ commit: string }> {
      return (await forge(input.provider, 'merge', input.sessionId)).merge(input);
    },

    async mergeSessionBranch(
      input: MergeInput,
    ): Promise<{ commit: string; base: string; alreadyMerged: boolean }> {
      const dir = join(mkdtempSync(join(tmpdir(), 'kumoss-merge-')), 'repo');
      const repo = await remote(input.sessionId, input.repositoryUrl);
      try {
        await repo.run(['clone', '--quiet', '--no-tags', input.repositoryUrl, dir]);
        const base =
          input.base ??
          (await git.run(['symbolic-ref', '--short', 'refs/remotes/origin/HEAD'], dir))
            .trim()
            .replace(/^origin\//, '');
        const heads = await git.run(
          ['for-each-ref', '--format=%(refname:strip=3)', 'refs/remotes/origin/'],
          dir,
        );
        if (!heads.split('\n').includes(input.head)) {
          throw ApplicationFailure.nonRetryable(
            `branch ${input.head} does not exist`,
            ErrorTypes.RepositoryNotFound,
          );
        }
        await git.run(['checkout', '--quiet', '-B', base, `origin/${base}`], dir);
        try {
          await git.run(['merge-base', '--is-ancestor', `origin/${input.head}`, 'HEAD'], dir);
          return { commit: await git.head(dir), base, alreadyMerged: true };
        } catch {
          // not merged yet
        }
        await git.run(['merge', '--no-ff', '--quiet', '-m', input.message, `origin/${input.head}`], dir);
        // A push rejected because the base moved is retried by Temporal on a fresh clone.
        await repo.run(['push', '--quiet', 'origin', `${base}:refs/heads/${base}`], dir);
        return { commit: await git.head(dir), base, alreadyMerged: false };
      } finally {
        rmSync(join(dir, '..'), { recursive: true, force: true });
      }
    },
  };
}
