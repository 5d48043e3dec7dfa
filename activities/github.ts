// Pull requests on GitHub through @octokit/rest, authenticated with GIT_TOKEN. The API base URL is
// configurable (GitHub Enterprise; the loopback server the tests run). Every call is safe to
// repeat: opening adopts the pull request that already exists for the head branch, merging
// answers the merge commit of a pull request that is already merged (a retry after a lost reply).
import { Octokit } from '@octokit/rest';
import { ApplicationFailure } from '@temporalio/common';
import { ErrorTypes } from '../shared/errors';
import { forgeFailure, repositoryPath, type Forge, type OpenedPullRequest } from './forge';

export type { OpenedPullRequest };

export interface GitHubOptions {
  token: string;
  /** Default https://api.github.com */
  baseUrl?: string;
}

/** owner and repo from https://github.com/<owner>/<repo>(.git) */
export function githubRepo(repositoryUrl: string): { owner: string; repo: string } {
  const [owner = '', repo = ''] = repositoryPath(repositoryUrl, 'GitHub', 2);
  return { owner, repo };
}

export class GitHubPullRequests implements Forge {
  private readonly octokit: Octokit;

  constructor(opts: GitHubOptions) {
    this.octokit = new Octokit({
      auth: opts.token,
      ...(opts.baseUrl ? { baseUrl: opts.baseUrl } : {}),
      userAgent: 'kumoss',
      // Temporal retries; the SDK's own retries would multiply them.
      request: { retries: 0 },
      log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
  }

  /** The repository's default branch: the base of its pull requests. */
  async defaultBranch(repositoryUrl: string): Promise<string> {
    const { owner, repo } = githubRepo(repositoryUrl);
    try {
      return (await this.octokit.rest.repos.get({ owner, repo })).data.default_branch;
    } catch (err) {
      throw forgeFailure(err, 'GitHub', `read ${owner}/${repo}`);
    }
  }

  /** Opens the pull request of `head`, or adopts the one that already exists for it. */
  async open(pr: {
    repositoryUrl: string;
    head: string;
    base: string;
    title: string;
    body: string;
  }): Promise<OpenedPullRequest> {
    const { owner, repo } = githubRepo(pr.repositoryUrl);
    try {
      const existing = await this.octokit.rest.pulls.list({
        owner,
        repo,
        head: `${owner}:${pr.head}`,
        state: 'all',
        per_page: 10,
      });
      const found =
        existing.data.find((p) => p.head.ref === pr.head && p.state === 'open') ?? existing.data[0];
      if (found) {
        return {
          number: found.number,
          url: found.html_url,
          state: found.merged_at ? 'merged' : found.state === 'open' ? 'open' : 'closed',
          adopted: true,
        };
      }
      const res = await this.octokit.rest.pulls.create({
        owner,
        repo,
        head: pr.head,
        base: pr.base,
        title: pr.title,
        body: pr.body,
      });
      return { number: res.data.number, url: res.data.html_url, state: 'open', adopted: false };
    } catch (err) {
      throw forgeFailure(err, 'GitHub', `open a pull request from ${pr.head}`);
    }
  }

  /** Merges the pull request; one already merged answers its merge commit. */
  async merge(pr: { repositoryUrl: string; number: number; message: string }): Promise<{ commit: string }> {
    const { owner, repo } = githubRepo(pr.repositoryUrl);
    const merged = async (): Promise<string | null> => {
      const { data } = await this.octokit.rest.pulls.get({ owner, repo, pull_number: pr.number });
      return data.merged && data.merge_commit_sha ? data.merge_commit_sha : null;
    };
    try {
      const before = await merged();
      if (before) return { commit: before };
      const res = await this.octokit.rest.pulls.merge({
        owner,
        repo,
        pull_number: pr.number,
        commit_title: pr.message,
        merge_method: 'merge',
      });
      if (!res.data.merged) {
        throw ApplicationFailure.nonRetryable(
          `GitHub did not merge pull request #${pr.number}: ${res.data.message}`,
          ErrorTypes.ForgeRequestRejected,
        );
      }
      return { commit: res.data.sha };
    } catch (err) {
      if (err instanceof ApplicationFailure) throw err;
      throw forgeFailure(err, 'GitHub', `merge pull request #${pr.number}`);
    }
  }
}
