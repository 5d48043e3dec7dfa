// A loopback server that speaks the part of the GitLab REST API (v4) Kumoss uses — project
// (default branch), merge requests (list by source branch, create, show, merge) — with state,
// so that retries meet what an earlier call did. `loseNextReply(route)` makes it do the work of the
// next such request and then drop the connection before answering (a reply lost on the way).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LoopbackMergeRequest {
  iid: number;
  source_branch: string;
  target_branch: string;
  title: string;
  description: string;
  state: 'opened' | 'merged';
  merge_commit_sha: string | null;
}

export interface GitLabLoopback {
  url: string;
  /** Merge requests by project path. */
  mergeRequests: Map<string, LoopbackMergeRequest[]>;
  seen: { method: string; url: string; token?: string; body: Record<string, unknown> }[];
  loseNextReply(route: 'create' | 'merge'): void;
  close(): Promise<void>;
}

export async function startGitLabLoopback(defaultBranch = 'main'): Promise<GitLabLoopback> {
  const mergeRequests = new Map<string, LoopbackMergeRequest[]>();
  const seen: GitLabLoopback['seen'] = [];
  const lose = new Set<string>();
  let commits = 0;
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
      const url = new URL(req.url ?? '/', 'http://loopback');
      const token = req.headers['private-token'];
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        token: typeof token === 'string' ? token : undefined,
        body,
      });
      const reply = (status: number, payload: unknown, route?: string) => {
        if (route && lose.delete(route)) {
          req.socket.destroy();
          return;
        }
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
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
      if (!mrPath && req.method === 'GET')
        return reply(200, { path_with_namespace: project, default_branch: defaultBranch });
      if (mrPath && !iid && req.method === 'GET') {
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
      if (mrPath && !iid && req.method === 'POST') {
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
      if (!merge && req.method === 'GET') return reply(200, view(x));
      if (merge && req.method === 'PUT') {
        if (x.state === 'merged') return reply(405, { message: '405 Method Not Allowed' });
        x.state = 'merged';
        x.merge_commit_sha = `mr${String(++commits).padStart(38, '0')}`;
        return reply(200, view(x), 'merge');
      }
      return reply(404, { message: '404 Not Found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    mergeRequests,
    seen,
    loseNextReply: (route) => lose.add(route),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
