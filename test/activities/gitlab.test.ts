// The GitLab merge-request client against a loopback server that speaks the GitLab REST API (v4)
// with state (test/support/gitlab-loopback.ts): default branch, open once per source branch (a
// retry adopts), a merge that survives a lost reply, refusals classified by HTTP status.
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitLabMergeRequests, gitlabProject } from '../../activities/gitlab';
import { ErrorTypes } from '../../shared/errors';
import { startGitLabLoopback, type GitLabLoopback } from '../support/gitlab-loopback';

describe('GitLab merge requests (loopback GitLab REST API)', () => {
  let gl: GitLabLoopback;
  const repositoryUrl = 'https://gitlab.com/acme/platform/infra.git';

  beforeAll(async () => {
    gl = await startGitLabLoopback('trunk');
  });
  afterAll(async () => {
    await gl?.close();
  });

  it("names the project by its path, including subgroups, as GitLab's id", () => {
    expect(gitlabProject(repositoryUrl)).toBe('acme%2Fplatform%2Finfra');
    expect(() => gitlabProject('https://gitlab.com/infra')).toThrow(/not a GitLab repository URL/);
  });

  it('reads the base from the default branch, opens with the token, adopts on a retry after a lost reply, and merges once', async () => {
    const client = new GitLabMergeRequests({ url: gl.url, token: 'glpat-KUMOSS-SECRET-loopback' });
    expect(await client.defaultBranch(repositoryUrl)).toBe('trunk');
    const mr = { repositoryUrl, head: 'kumoss/s-1', base: 'trunk', title: 'Reconcile drift', body: 'Body' };
    gl.loseNextReply('create');
    await expect(client.open(mr)).rejects.toThrow();
    const opened = await client.open(mr);
    expect(opened).toEqual({
      number: 1,
      url: 'https://gitlab.com/acme/platform/infra/-/merge_requests/1',
      state: 'open',
      adopted: true,
    });
    expect(gl.mergeRequests.get('acme/platform/infra')).toHaveLength(1);
    expect(gl.seen.every((s) => s.headers['private-token'] === 'glpat-KUMOSS-SECRET-loopback')).toBe(true);

    gl.loseNextReply('merge');
    await expect(client.merge({ repositoryUrl, number: 1, message: 'Merge' })).rejects.toThrow();
    const merged = await client.merge({ repositoryUrl, number: 1, message: 'Merge' });
    expect(merged.commit).toBe(gl.mergeRequests.get('acme/platform/infra')?.[0]?.merge_commit_sha);
    expect(gl.seen.filter((s) => s.method === 'PUT')).toHaveLength(1);
  });

  it('classifies a refusal by its HTTP status as non-retryable', async () => {
    const client = new GitLabMergeRequests({ url: gl.url, token: 't' });
    const err = await client.merge({ repositoryUrl, number: 99, message: 'Merge' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: ErrorTypes.ForgeRequestRejected, nonRetryable: true });
    expect((err as Error).message).toMatch(/HTTP 404/);
  });
});
