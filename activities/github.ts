// Pull requests on GitHub through @octokit/rest, authenticated with GIT_TOKEN. The API base URL is
// configurable (GitHub Enterprise; the loopback server the tests run).
import { Octokit } from '@octokit/rest';

export interface GitHubOptions {
  token: string;
  /** Default https://api.github.com */
  baseUrl?: string;
}

/** owner and repo from https://github.com/<owner>/<repo>(.git) */
export function githubRepo(repositoryUrl: string): { owner: string; repo: string } {
  const parts = new URL(repositoryUrl).pathname
    .replace(/^\//, '')
    .replace(/\.git$/, '')
    .split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1])
    throw new Error(`not a GitHub repository URL: ${repositoryUrl}`);
  return { owner: parts[0], repo: parts[1] };
}

export class GitHubPullRequests {
  private readonly octokit: Octokit;

  constructor(opts: GitHubOptions) {
    this.octokit = new Octokit({
      auth: opts.token,
      ...(opts.baseUrl ? { baseUrl: opts.baseUrl } : {}),
      userAgent: 'kumoss',
      log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
  }

  async open(pr: { repositoryUrl: string; head: string; base: string; title: string; body: string }) {
    const { owner, repo } = githubRepo(pr.repositoryUrl);
    const res = await this.octokit.rest.pulls.create({
      owner,
      repo,
      head: pr.head,
      base: pr.base,
      title: pr.title,
      body: pr.body,
    });
    return { number: res.data.number, url: res.data.html_url };
  }

  async merge(pr: { repositoryUrl: string; number: number; message: string }) {
    const { owner, repo } = githubRepo(pr.repositoryUrl);
    const res = await this.octokit.rest.pulls.merge({
      owner,
      repo,
      pull_number: pr.number,
      commit_title: pr.message,
      merge_method: 'merge',
    });
    if (!res.data.merged)
      throw new Error(`GitHub did not merge pull request #${pr.number}: ${res.data.message}`);
    return { commit: res.data.sha };
  }
}
