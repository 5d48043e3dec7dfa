// A loopback server that speaks the part of the GitLab REST API (v4) Kumoss uses — project
// (default branch), merge requests (list by source branch, create, show, merge) — with state,
// so that retries meet what an earlier call did. `loseNextReply(route)` makes it do the work of the
// next such request and then drop the connection before answering (a reply lost on the way).
import { reply, startJsonLoopback, type JsonLoopback } from './json-loopback';

export interface LoopbackMergeRequest {
  iid: number;
  source_branch: string;
  target_branch: string;
  title: string;
  description: string;
  state: 'opened' | 'merged';
  merge_commit_sha: string | null;
}

export interface GitLabLoopback extends JsonLoopback<'create' | 'merge'> {
  /** Merge requests by project path. */
  mergeRequests: Map<string, LoopbackMergeRequest[]>;
}

export async function startGitLabLoopback(defaultBranch = 'main'): Promise<GitLabLoopback> {
  const mergeRequests = new Map<string, LoopbackMergeRequest[]>();
  let commits = 0;
  const server = await startJsonLoopback<'create' | 'merge'>(({ method, url, body }) => {
    // GitLab's project id here is the URL-encoded path: one path segment after /projects/.
    const m = /^\/api\/v4\/projects\/([^/]+)(\/merge_requests(?:\/(\d+)(\/merge)?)?)?$/.exec(url.pathname);
    if (!m) return reply(404, { message: '404 Not Found' });
    const [, rawId, mrPath, iid, merge] = m;
    const project = decodeURIComponent(rawId ?? '');
    const list = mergeRequests.get(project) ?? [];
    mergeRequests.set(project, list);
    const view = (x: LoopbackMergeRequest) => ({
      ...x,
      web_url: `https://gitlab.com/${project}/-/merge_requests/${x.iid}`,
    });
    if (!mrPath && method === 'GET')
      return reply(200, { path_with_namespace: project, default_branch: defaultBranch });
    if (mrPath && !iid && method === 'GET') {
      const q = url.searchParams;
      return reply(
        200,
        list
          .filter((x) => !q.get('state') || x.state === q.get('state'))
          .filter((x) => !q.get('source_branch') || x.source_branch === q.get('source_branch'))
          .filter((x) => !q.get('target_branch') || x.target_branch === q.get('target_branch'))
          .map(view),
      );
    }
    if (mrPath && !iid && method === 'POST') {
      if (list.some((x) => x.source_branch === body.source_branch && x.state === 'opened')) {
        return reply(409, {
          message: ['Another open merge request already exists for this source branch'],
        });
      }
      const x: LoopbackMergeRequest = {
        iid: list.length + 1,
        source_branch: String(body.source_branch),
        target_branch: String(body.target_branch),
        title: String(body.title),
        description: typeof body.description === 'string' ? body.description : '',
        state: 'opened',
        merge_commit_sha: null,
      };
      list.push(x);
      return reply(201, view(x), 'create');
    }
    const x = list.find((y) => y.iid === Number(iid));
    if (!x) return reply(404, { message: '404 Not found' });
    if (!merge && method === 'GET') return reply(200, view(x));
    if (merge && method === 'PUT') {
      if (x.state === 'merged') return reply(405, { message: '405 Method Not Allowed' });
      x.state = 'merged';
      x.merge_commit_sha = `mr${String(++commits).padStart(38, '0')}`;
      return reply(200, view(x), 'merge');
    }
    return reply(404, { message: '404 Not Found' });
  });
  return {
    ...server,
    mergeRequests,
  };
}
