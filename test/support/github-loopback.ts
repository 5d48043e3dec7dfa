// A loopback server that speaks the part of the GitHub REST API Kumoss uses — repository (default
// branch), pull requests (list by head, create, get, merge) — with state, so that retries meet
// what an earlier call did. `loseNextReply(route)` makes the server do the work of the next such
// request and then drop the connection before answering (a reply lost on the way).
import { reply, startJsonLoopback, type JsonLoopback } from './json-loopback';

export interface LoopbackPull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: 'open' | 'closed';
  merged: boolean;
  merge_commit_sha: string | null;
}

export interface GitHubLoopback extends JsonLoopback<'create' | 'merge'> {
  /** The API base URL the Octokit client is pointed at. */
  baseUrl: string;
  /** Pull requests by `owner/repo`. */
  pulls: Map<string, LoopbackPull[]>;
}

export async function startGitHubLoopback(defaultBranch = 'main'): Promise<GitHubLoopback> {
  const pulls = new Map<string, LoopbackPull[]>();
  let commits = 0;
  const server = await startJsonLoopback<'create' | 'merge'>(({ method, url, body }) => {
    const m = /^\/repos\/([^/]+)\/([^/]+)(\/pulls(?:\/(\d+)(\/merge)?)?)?$/.exec(url.pathname);
    if (!m) return reply(404, { message: 'Not Found' });
    const [, owner, repo, pullsPath, num, merge] = m;
    const key = `${owner}/${repo}`;
    const list = pulls.get(key) ?? [];
    pulls.set(key, list);
    const view = (p: LoopbackPull) => ({
      number: p.number,
      html_url: `https://github.com/${key}/pull/${p.number}`,
      state: p.state,
      title: p.title,
      body: p.body,
      head: { ref: p.head, label: `${owner}:${p.head}` },
      base: { ref: p.base },
      merged: p.merged,
      merged_at: p.merged ? '2026-12-01T00:00:00Z' : null,
      merge_commit_sha: p.merge_commit_sha,
    });
    if (!pullsPath && method === 'GET') return reply(200, { default_branch: defaultBranch, full_name: key });
    if (pullsPath && !num && method === 'GET') {
      const head = url.searchParams.get('head');
      return reply(200, list.filter((p) => !head || `${owner}:${p.head}` === head).map(view));
    }
    if (pullsPath && !num && method === 'POST') {
      if (list.some((p) => p.head === body.head && p.state === 'open')) {
        return reply(422, { message: `A pull request already exists for ${owner}:${String(body.head)}.` });
      }
      const p: LoopbackPull = {
        number: list.length + 1,
        head: String(body.head),
        base: String(body.base),
        title: String(body.title),
        body: typeof body.body === 'string' ? body.body : '',
        state: 'open',
        merged: false,
        merge_commit_sha: null,
      };
      list.push(p);
      return reply(201, view(p), 'create');
    }
    const p = list.find((x) => x.number === Number(num));
    if (!p) return reply(404, { message: 'Not Found' });
    if (!merge && method === 'GET') return reply(200, view(p));
    if (merge && method === 'PUT') {
      if (p.merged) return reply(405, { message: 'Pull Request is not mergeable' });
      p.merged = true;
      p.state = 'closed';
      p.merge_commit_sha = `merge${String(++commits).padStart(35, '0')}`;
      return reply(
        200,
        { sha: p.merge_commit_sha, merged: true, message: 'Pull Request successfully merged' },
        'merge',
      );
    }
    return reply(404, { message: 'Not Found' });
  });
  return {
    ...server,
    baseUrl: server.url,
    pulls,
  };
}
