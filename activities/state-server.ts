// Kumoss-managed state served to the engine over Terraform's `http` backend (issue 26 item 4).
// The engine never holds the object store's keys: this server, in the worker process on loopback,
// reads and writes `<prefix>/<state project id>/terraform.tfstate` with the worker's own client,
// and the engine gets, per engine process, a grant — a random password valid for one state and
// only while that process runs — in its environment (`TF_HTTP_*`). Terraform keeps backend
// settings that come from the environment neither in `.terraform/` nor in a saved plan, so no
// artifact and no checkout carries a credential, and one seen by a repository's code is dead when
// its run ends. A grant taken under the state's lease may write only while that lease stands: a
// write from an engine whose lease was lost is refused (409) even before the engine is stopped.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';

/** The most a state may weigh (a root of thousands of resources is a few MiB). */
const MAX_STATE_BYTES = 256 * 1024 * 1024;

export interface StateStore {
  s3: S3Client;
  bucket: string;
  /** The object key of a state project id's state. */
  key(stateProjectId: string): string;
}

/** A grant under a lease: writes are accepted while `holds()` says the lease is still this one's. */
export interface LeaseCheck {
  holds(): Promise<boolean>;
}

interface Grant {
  stateProjectId: string;
  password: Buffer;
  lease?: LeaseCheck;
}

export interface StateGrant {
  /** The engine's `TF_HTTP_*` variables for this grant. */
  env: Record<string, string>;
  /** Ends the grant: its password is refused from now on. */
  revoke(): void;
}

const USER = 'kumoss';

export class StateServer {
  private server?: Promise<{ server: Server; origin: string }>;
  private readonly grants = new Map<string, Grant>();

  constructor(private readonly store: StateStore) {}

  /** Grants currently valid (tests: none outlives its engine process). */
  get activeGrants(): number {
    return this.grants.size;
  }

  private start(): Promise<{ server: Server; origin: string }> {
    this.server ??= new Promise((resolve, reject) => {
      const server = createServer((req, res) => {
        this.handle(req, res).catch((err: unknown) => {
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`state server error: ${(err as Error).message}`);
        });
      });
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.unref();
        resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
      });
    });
    return this.server;
  }

  /** A grant on `stateProjectId` (under `lease` when the call changes the state). */
  async grant(stateProjectId: string, lease?: LeaseCheck): Promise<StateGrant> {
    const { origin } = await this.start();
    const id = randomBytes(9).toString('base64url');
    const password = randomBytes(32).toString('base64url');
    this.grants.set(id, {
      stateProjectId,
      password: Buffer.from(password),
      ...(lease ? { lease } : {}),
    });
    const address = `${origin}/state/${encodeURIComponent(stateProjectId)}`;
    return {
      env: {
        TF_HTTP_ADDRESS: address,
        TF_HTTP_LOCK_ADDRESS: `${address}/lock`,
        TF_HTTP_UNLOCK_ADDRESS: `${address}/lock`,
        TF_HTTP_USERNAME: `${USER}.${id}`,
        TF_HTTP_PASSWORD: password,
      },
      revoke: () => {
        this.grants.delete(id);
      },
    };
  }

  async close(): Promise<void> {
    const s = await this.server;
    await new Promise<void>((resolve) => (s ? s.server.close(() => resolve()) : resolve()));
  }

  /** The grant a request's Basic credentials name, if they are valid for `stateProjectId`. */
  private authorized(req: IncomingMessage, stateProjectId: string): Grant | undefined {
    const m = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    if (!m?.[1]) return undefined;
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const user = decoded.slice(0, colon);
    const given = Buffer.from(decoded.slice(colon + 1));
    if (colon < 0 || !user.startsWith(`${USER}.`)) return undefined;
    const grant = this.grants.get(user.slice(USER.length + 1));
    if (!grant || grant.stateProjectId !== stateProjectId) return undefined;
    if (given.length !== grant.password.length || !timingSafeEqual(given, grant.password)) return undefined;
    return grant;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://state');
    const m = /^\/state\/([^/]+)(\/lock)?$/.exec(url.pathname);
    const reply = (status: number, body = '', type = 'text/plain') => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
    if (!m?.[1]) return reply(404, 'no such state');
    const stateProjectId = decodeURIComponent(m[1]);
    const grant = this.authorized(req, stateProjectId);
    if (!grant) {
      req.resume();
      return reply(401, 'a valid grant for this state is required');
    }
    const key = this.store.key(stateProjectId);
    if (m[2]) {
      req.resume();
      // The state's lease (shared/infra/db/state-locks.ts) is the lock: a call that changes the state
      // holds it before its engine starts, so the engine's own LOCK finds it taken by itself.
      if (req.method === 'UNLOCK') return reply(200);
      if (req.method !== 'LOCK') return reply(405, 'LOCK or UNLOCK');
      if (grant.lease && (await grant.lease.holds())) return reply(200);
      return reply(
        423,
        JSON.stringify({ ID: 'kumoss', Operation: 'read', Info: 'this call does not hold the state lease' }),
        'application/json',
      );
    }
    if (req.method === 'GET') {
      req.resume();
      try {
        const r = await this.store.s3.send(new GetObjectCommand({ Bucket: this.store.bucket, Key: key }));
        return reply(
          200,
          Buffer.from(await r.Body!.transformToByteArray()).toString('utf8'),
          'application/json',
        );
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return reply(404);
        throw err;
      }
    }
    if (req.method === 'POST' || req.method === 'DELETE') {
      if (!grant.lease || !(await grant.lease.holds())) {
        req.resume();
        return reply(409, 'the state lease is not held by this call: the write is refused');
      }
      if (req.method === 'DELETE') {
        req.resume();
        await this.store.s3.send(new DeleteObjectCommand({ Bucket: this.store.bucket, Key: key }));
        return reply(200);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req) {
        size += (chunk as Buffer).length;
        if (size > MAX_STATE_BYTES) return reply(413, `a state larger than ${MAX_STATE_BYTES} bytes`);
        chunks.push(chunk as Buffer);
      }
      await this.store.s3.send(
        new PutObjectCommand({
          Bucket: this.store.bucket,
          Key: key,
          Body: Buffer.concat(chunks),
          ContentType: 'application/json',
        }),
      );
      return reply(200);
    }
    req.resume();
    return reply(405, 'GET, POST, DELETE, LOCK or UNLOCK');
  }
}
