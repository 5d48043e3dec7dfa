// What the forges (GitHub, GitLab, Gitea) share: the contract a session's pull request needs, the
// repository path of an https URL, and one classification of their refusals by HTTP status.
import { ApplicationFailure } from '@temporalio/common';
import { ErrorTypes } from '../shared/errors';
import { HttpJsonError, requestJson } from '../shared/infra/http-json';

export interface OpenedPullRequest {
  number: number;
  url: string;
  state: 'open' | 'merged' | 'closed';
  /** True when the pull request existed already (adopted, not opened). */
  adopted: boolean;
}

/** The same contract on every forge: each call is safe to repeat after a lost reply. */
export interface Forge {
  /** The repository's default branch: the base of its pull requests. */
  defaultBranch(repositoryUrl: string): Promise<string>;
  /** Opens the pull request of `head`, or adopts the one already open for it. */
  open(pr: {
    repositoryUrl: string;
    head: string;
    base: string;
    title: string;
    body: string;
  }): Promise<OpenedPullRequest>;
  /** Merges it; one already merged answers its merge commit. */
  merge(pr: { repositoryUrl: string; number: number; message: string }): Promise<{ commit: string }>;
}

/** The path segments of https://host/<a>/<b>(.git), at least `min` of them (GitLab has subgroups). */
export function repositoryPath(repositoryUrl: string, forge: string, exactly?: number): string[] {
  const parts = new URL(repositoryUrl).pathname
    .replace(/^\//, '')
    .replace(/\.git$/, '')
    .split('/');
  const ok = parts.every(Boolean) && (exactly === undefined ? parts.length >= 2 : parts.length === exactly);
  if (!ok) throw new Error(`not a ${forge} repository URL: ${repositoryUrl}`);
  return parts;
}

/** Statuses that say the request itself is wrong (auth, missing, not allowed, conflict): final. */
const REFUSED = new Set([401, 403, 404, 405, 406, 409, 422]);

/**
 * A forge's answer as a Temporal failure, by HTTP status: a refusal is non-retryable (no retry
 * changes it); anything else — 5xx, 429, the network — is retried by Temporal.
 */
export function forgeFailure(err: unknown, forge: string, what: string): Error {
  const status = (err as { status?: unknown }).status;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof status === 'number' && REFUSED.has(status)) {
    return ApplicationFailure.nonRetryable(
      `${forge} refused to ${what} (HTTP ${status}): ${message}`,
      ErrorTypes.ForgeRequestRejected,
    );
  }
  return err instanceof Error ? err : new Error(message);
}

/**
 * A JSON caller for a forge's REST API at `base` (…/api/v1, …/api/v4), with its auth header and
 * CA; failures come back classified by forgeFailure. `missing: 'undefined'` answers a 404 as
 * undefined (a lookup), instead of a refusal.
 */
export function forgeApi(o: {
  forge: string;
  base: string;
  headers: Record<string, string>;
  ca?: string | Buffer;
  timeoutMs?: number;
}) {
  return async (
    path: string,
    what: string,
    init: { method?: string; body?: unknown; missing?: 'undefined' } = {},
  ): Promise<unknown> => {
    try {
      return await requestJson(`${o.base.replace(/\/$/, '')}${path}`, {
        ...(init.method ? { method: init.method } : {}),
        ...(init.body !== undefined ? { body: init.body } : {}),
        headers: o.headers,
        ...(o.ca ? { ca: o.ca } : {}),
        ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
      });
    } catch (err) {
      if (init.missing === 'undefined' && err instanceof HttpJsonError && err.status === 404)
        return undefined;
      throw forgeFailure(err, o.forge, what);
    }
  };
}
