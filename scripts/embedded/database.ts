// The embedded metadata store: PGlite (PostgreSQL compiled to WASM, in this process) served over
// the PostgreSQL wire protocol on loopback, so the API and the worker use the same `pg` driver
// they use against a real PostgreSQL (DATABASE_URL).
import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { freePort } from './ports';

export interface EmbeddedDatabase {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startEmbeddedDatabase(opts: {
  /** Data directory; undefined keeps the database in memory (tests). */
  dataDir?: string;
  host?: string;
  port?: number;
}): Promise<EmbeddedDatabase> {
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  const db = await PGlite.create(opts.dataDir ?? 'memory://');
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? (await freePort(host));
  const server = new PGLiteSocketServer({ db, host, port, maxConnections: 16 });
  await server.start();
  return {
    url: `postgres://postgres@${host}:${port}/postgres?sslmode=disable`,
    port,
    close: async () => {
      await server.stop();
      await db.close();
    },
  };
}
