// A loopback HTTP server answering JSON from a handler, for the forges' wire protocols (GitHub,
// GitLab): it records every request, and `loseNextReply(route)` makes it do the work of the next
// request on that route and then drop the connection before answering — a reply lost on the way.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LoopbackRequest {
  method: string;
  url: URL;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** What the handler answers; `route` names it for loseNextReply. */
export interface LoopbackReply {
  status: number;
  payload: unknown;
  route?: string;
}

/** A reply; with `route`, loseNextReply(route) can make it the one that is lost. */
export function reply(status: number, payload: unknown, route?: string): LoopbackReply {
  return { status, payload, ...(route ? { route } : {}) };
}

export interface JsonLoopback<Route extends string> {
  url: string;
  seen: { method: string; url: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }[];
  loseNextReply(route: Route): void;
  close(): Promise<void>;
}

export async function startJsonLoopback<Route extends string>(
  handle: (req: LoopbackRequest) => LoopbackReply,
): Promise<JsonLoopback<Route>> {
  const seen: JsonLoopback<Route>['seen'] = [];
  const lose = new Set<string>();
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const r = handle({
        method: req.method ?? '',
        url: new URL(req.url ?? '/', 'http://loopback'),
        headers: req.headers,
        body,
      });
      if (r.route && lose.delete(r.route)) {
        req.socket.destroy();
        return;
      }
      res.writeHead(r.status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(r.payload));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    loseNextReply: (route) => lose.add(route),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
