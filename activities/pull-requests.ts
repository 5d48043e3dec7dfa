// Merging a session's pull request on the embedded git host: a real merge of the session branch
// into the base branch, pushed. Idempotent: a branch already merged is not merged again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { ErrorTypes } from '../shared/errors';
import type { GitClient } from './git';
import type { GitHubPullRequests } from './github';

export interface MergeInput {
  repositoryUrl: string;
  head: string;
  base?: string;
  message: string;
}

export function createPullRequestActivities(deps: { git: GitClient; github?: GitHubPullRequests }) {
  const { git } = deps;
  return {
    async mergeGitHubPullRequest(input: {
      repositoryUrl: string;
      number: number;
      message: string;
    }): Promise<{ commit: string }> {
      if (!deps.github) {
        throw ApplicationFailure.nonRetryable(
          'GIT_TOKEN is not set on the worker: it cannot merge on GitHub',
          ErrorTypes.InvalidInput,
        );
      }
      return deps.github.merge(input);
    },

    async mergeSessionBranch(
      input: MergeInput,
    ): Promise<{ commit: string; base: string; alreadyMerged: boolean }> {
      const dir = join(mkdtempSync(join(tmpdir(), 'kumoss-merge-')), 'repo');
      try {
        await git.run(['clone', '--quiet', '--no-tags', input.repositoryUrl, dir]);
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
        await git.run(['push', '--quiet', 'origin', `${base}:refs/heads/${base}`], dir);
        return { commit: await git.head(dir), base, alreadyMerged: false };
      } finally {
        rmSync(join(dir, '..'), { recursive: true, force: true });
      }
    },
  };
}
