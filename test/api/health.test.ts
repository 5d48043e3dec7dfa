// GET /health over a real socket, with the real component checks against the run's stack.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { workerIdentity } from '../../worker/worker';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseCheck, gitHostCheck, storageCheck, temporalCheck, workerCheck } from '../../api/checks';
import { createApp } from '../../api/app';
import { ArtifactStore, createS3Client } from '../../shared/infra/object-store';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { artifactStore, stack, temporalHarness } from '../support/stack';

async function listen(app: ReturnType<typeof createApp>): Promise<{ server: Server; url: string }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('API health', () => {
  let connection: Connection;
  let db: Db;
  beforeAll(async () => {
    connection = await Connection.connect({ address: stack().temporalAddress });
    db = createDb(stack().databaseUrl);
    await migrate(db);
  });
  afterAll(async () => {
    await connection.close();
    await db.destroy();
  });

  it('answers 200 with every component up', async () => {
    const s = stack();
    const { server, url } = await listen(
      createApp({
        checks: [
          temporalCheck(connection, s.namespace),
          storageCheck(artifactStore()),
          databaseCheck(db),
          gitHostCheck(s.gitHostUrl, s.gitCaFile),
        ],
        log: () => undefined,
      }),
    );
    try {
      const res = await fetch(`${url}/health`);
      const body = (await res.json()) as {
        status: string;
        components: { name: string; ok: boolean; detail: string }[];
      };
      expect(res.status).toBe(200);
      expect(body.status).toBe('ok');
      expect(body.components.map((c) => c.name)).toEqual([
        'temporal',
        'object_store',
        'database',
        'git_host',
      ]);
      expect(body.components.every((c) => c.ok)).toBe(true);
      expect(body.components.find((c) => c.name === 'database')?.detail).toMatch(/PostgreSQL/);
    } finally {
      server.close();
    }
  });

  it('answers 503 naming the component that is down', async () => {
    const deadStore = new ArtifactStore(
      createS3Client({ endpoint: 'http://127.0.0.1:9', bucket: 'x', region: 'us-east-1' }),
      'x',
    );
    const { server, url } = await listen(
      createApp({ checks: [databaseCheck(db), storageCheck(deadStore)], log: () => undefined }),
    );
    try {
      const res = await fetch(`${url}/health`);
      const body = (await res.json()) as { status: string; components: { name: string; ok: boolean }[] };
      expect(res.status).toBe(503);
      expect(body.status).toBe('degraded');
      expect(body.components).toEqual([
        expect.objectContaining({ name: 'database', ok: true }),
        expect.objectContaining({ name: 'object_store', ok: false }),
      ]);
    } finally {
      server.close();
    }
  });

  it('answers an unknown route with a JSON 404 and malformed JSON with a 400', async () => {
    const { server, url } = await listen(createApp({ checks: [], log: () => undefined }));
    try {
      const missing = await fetch(`${url}/nope`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toEqual({
        error: { code: 'not_found', message: 'No route for GET /nope' },
      });
      const bad = await fetch(`${url}/nope`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{',
      });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('entity_parse_failed');
    } finally {
      server.close();
    }
  });

  it('says the worker is down while no worker polls the task queue, and up once one does', async () => {
    const s = stack();
    const idle = `health-idle-${Date.now()}`;
    await expect(workerCheck(connection, s.namespace, idle).check()).rejects.toThrow(
      `no worker polls task queue ${idle} yet`,
    );
    const h = await temporalHarness('health', undefined, { identity: workerIdentity('bubblewrap') });
    try {
      const check = workerCheck(connection, s.namespace, h.taskQueue);
      await expect
        .poll(() => check.check().catch((e: Error) => e.message), { timeout: 30_000 })
        .toBe(`1 poller(s) on task queue ${h.taskQueue}; engine sandbox: bubblewrap`);
    } finally {
      await h.close();
    }
  });

  it('says so when a worker cannot run the engine sandbox (its identity names it)', async () => {
    const s = stack();
    const identity = workerIdentity('unavailable');
    const h = await temporalHarness('health-nosandbox', undefined, { identity });
    try {
      const check = workerCheck(connection, s.namespace, h.taskQueue);
      await expect
        .poll(() => check.check().catch((e: Error) => e.message), { timeout: 30_000 })
        .toBe(
          `worker ${identity.split(' ')[0]} cannot run the engine sandbox (bubblewrap): its engine calls are refused`,
        );
    } finally {
      await h.close();
    }
  });
});
