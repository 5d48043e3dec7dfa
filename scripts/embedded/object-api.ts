// A REST server of JSON objects (POST /api/objects, GET|PUT|DELETE /api/objects/{id},
// GET /api/objects), the shape of the restapi provider's fakeserver. It stands in for a cloud API
// in the drift test bed and the demo: Terraform manages its objects through the `kumoss/rest`
// provider, and a test or an operator changes them out of band with a plain PUT.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

export type ApiObject = Record<string, unknown> & { id: string };

export interface ObjectApi {
  url: string;
  port: number;
  objects: Map<string, ApiObject>;
  put(id: string, body: Record<string, unknown>): Promise<void>;
  get(id: string): Promise<ApiObject | undefined>;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startObjectApi(
  opts: { host?: string; port?: number; stateFile?: string } = {},
): Promise<ObjectApi> {
  const objects = new Map<string, ApiObject>();
  if (opts.stateFile && existsSync(opts.stateFile)) {
    for (const o of JSON.parse(readFileSync(opts.stateFile, 'utf8')) as ApiObject[]) objects.set(o.id, o);
  }
  const persist = (): void => {
    if (opts.stateFile) writeFileSync(opts.stateFile, JSON.stringify([...objects.values()], null, 2));
  };
  const server: Server = createServer((req, res) => {
    const send = (status: number, body?: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body === undefined ? '' : JSON.stringify(body));
    };
    const url = new URL(req.url ?? '/', 'http://object-api.invalid');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'api' || parts[1] !== 'objects' || parts.length > 3)
      return send(404, { error: 'not found' });
    const id = parts[2] ? decodeURIComponent(parts[2]) : undefined;
    readBody(req)
      .then((text) => {
        if (!id) {
          if (req.method === 'GET') return send(200, [...objects.values()]);
          if (req.method !== 'POST') return send(405, { error: 'method not allowed' });
        } else if (req.method !== 'POST' && !objects.has(id)) {
          return send(404, { error: `object ${id} not found` });
        }
        if (req.method === 'DELETE') {
          objects.delete(id as string);
          persist();
          return send(200, {});
        }
        if (req.method === 'GET') return send(200, objects.get(id as string));
        if (req.method !== 'POST' && req.method !== 'PUT') return send(405, { error: 'method not allowed' });
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          return send(400, { error: 'body is not JSON' });
        }
        if (typeof body !== 'object' || body === null || Array.isArray(body)) {
          return send(400, { error: 'body must be a JSON object' });
        }
        const objectId = id ?? (body as { id?: unknown }).id;
        if (typeof objectId !== 'string' || !objectId) return send(400, { error: 'object has no id field' });
        const stored = { ...(body as Record<string, unknown>), id: objectId };
        objects.set(objectId, stored);
        persist();
        return send(200, stored);
      })
      .catch(() => send(500, { error: 'cannot read request' }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;
  return {
    url,
    port,
    objects,
    async put(id, body) {
      const res = await fetch(`${url}/api/objects/${encodeURIComponent(id)}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`PUT ${id}: HTTP ${res.status}`);
    },
    async get(id) {
      const res = await fetch(`${url}/api/objects/${encodeURIComponent(id)}`);
      if (res.status === 404) return undefined;
      return (await res.json()) as ApiObject;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
