// The GitHub pull-request client through the real @octokit/rest, against a loopback server that
// speaks the GitHub REST API with state (test/support/github-loopback.ts): default branch, open
// once per head branch (a retry adopts), merge that survives a lost reply, errors classified by
// HTTP status.
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitHubPullRequests, githubRepo } from '../../activities/github';
import { ErrorTypes } from '../../shared/errors';
import { startGitHubLoopback, type GitHubLoopback } from '../support/github-loopback';

describe('GitHub pull requests (loopback GitHub REST API)', () => {
  let gh: GitHubLoopback;
  const repositoryUrl = 'https://github.com/acme/infra.git';

  beforeAll(async () => {
    gh = await startGitHubLoopback('trunk');
  });
  afterAll(async () => {
    await gh?.close();
  });

  it('parses owner and repository from the https URL', () => {
    expect(githubRepo('https://github.com/acme/infra.git')).toEqual({ owner: 'acme', repo: 'infra' });
    expect(() => githubRepo('https://github.com/acme')).toThrow(/not a GitHub repository URL/);
  });

  it("reads the base from the repository's default branch, opens with the token, and merges", async () => {
    const client = new GitHubPullRequests({
      token: 'ghp_KUMOSS-SECRET-loopback0123456789',
      baseUrl: gh.baseUrl,
    });
    expect(await client.defaultBranch(repositoryUrl)).toBe('trunk');
    const opened = await client.open({
      repositoryUrl,
      head: 'kumoss/s-1',
      base: 'trunk',
      title: 'Reconcile drift',
      body: 'Body',
    });
    expect(opened).toEqual({
      number: 1,
      url: 'https://github.com/acme/infra/pull/1',
      state: 'open',
      adopted: false,
    });
    const created = gh.seen.find((s) => s.method === 'POST');
    expect(created?.headers.authorization).toBe('token ghp_KUMOSS-SECRET-loopback0123456789');
    expect(created).toMatchObject({
      body: { head: 'kumoss/s-1', base: 'trunk', title: 'Reconcile drift', body: 'Body' },
    });
    const merged = await client.merge({ repositoryUrl, number: 1, message: 'Merge' });
    expect(merged.commit).toMatch(/^merge0+1$/);
    expect(gh.seen.find((s) => s.method === 'PUT')?.body).toEqual({
      merge_method: 'merge',
      commit_title: 'Merge',
    });
  });

  it('adopts the pull request a lost reply already opened instead of opening a second', async () => {
    const client = new GitHubPullRequests({ token: 't', baseUrl: gh.baseUrl });
    const pr = { repositoryUrl, head: 'kumoss/s-2', base: 'trunk', title: 'T', body: 'B' };
    gh.loseNextReply('create');
    await expect(client.open(pr)).rejects.toThrow();
    const again = await client.open(pr);
    expect(again).toMatchObject({ adopted: true, state: 'open' });
    expect(gh.pulls.get('acme/infra')?.filter((p) => p.head === 'kumoss/s-2')).toHaveLength(1);
  });

  it('answers the merge commit when a retry meets a merge whose reply was lost', async () => {
    const client = new GitHubPullRequests({ token: 't', baseUrl: gh.baseUrl });
    const { number } = await client.open({
      repositoryUrl,
      head: 'kumoss/s-3',
      base: 'trunk',
      title: 'T',
      body: 'B',
    });
    gh.loseNextReply('merge');
    const lost = await client.merge({ repositoryUrl, number, message: 'Merge' }).catch((e: unknown) => e);
    // The network error is retryable (not an ApplicationFailure marked non-retryable).
    expect(lost).toBeInstanceOf(Error);
    expect(lost instanceof ApplicationFailure && lost.nonRetryable).toBe(false);
    const pull = gh.pulls.get('acme/infra')?.find((p) => p.number === number);
    expect(pull?.merged).toBe(true);
    const retried = await client.merge({ repositoryUrl, number, message: 'Merge' });
    expect(retried.commit).toBe(pull?.merge_commit_sha);
    expect(
      gh.seen.filter((s) => s.method === 'PUT' && s.url.endsWith(`/pulls/${number}/merge`)),
    ).toHaveLength(1);
  });

  it('classifies a refusal by its HTTP status as non-retryable', async () => {
    const client = new GitHubPullRequests({ token: 't', baseUrl: gh.baseUrl });
    const err = await client.merge({ repositoryUrl, number: 999, message: 'Merge' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: ErrorTypes.ForgeRequestRejected, nonRetryable: true });
    expect((err as Error).message).toMatch(/HTTP 404/);
  });
});
