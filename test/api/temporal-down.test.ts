// While Temporal is unreachable the API answers 503 with a clear message, and a first request
// leaves no session behind.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../api/app';
import { freePort } from '../../scripts/embedded/ports';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { artifactStore, stack } from '../support/stack';
import { testUser } from '../support/api';

describe('API while Temporal is unreachable', () => {
  let db: Db;
  let server: Server;
  let url: string;
  let token: string;
  let org: string;

  beforeAll(async () => {
    db = createDb(stack().databaseUrl);
    await migrate(db);
    const created = await testUser(db, {
      name: `devops-down-${Date.now()}`,
      role: 'devops',
      organization: `down-${Date.now()}`,
    });
    token = created.token;
    org = created.user.organization_uuid;
    // Nothing listens there: every call fails as it would with the server down.
    const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: 1000 });
    const app = createApp({
      checks: [],
      log: () => undefined,
      sessions: {
        db,
        client: new Client({ connection }),
        taskQueue: 'nowhere',
        orchestration: { max_drift_reports: 3, drift_group_operations: 8 },
        artifacts: artifactStore(),
        presignTtlSeconds: 60,
        events: { pollMs: 100, maxPolls: 10 },
      },
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await db?.destroy();
  });

  it('answers 503 to a first request and keeps no session row', async () => {
    const res = await fetch(`${url}/api/v1/drift/full`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        repository_url: 'https://git.example.com/a/b.git',
        cloud: 'aws',
        scope_id: 's',
        text: 'Reconcile everything.',
      }),
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      error: {
        code: 'temporal_unavailable',
        message: 'Temporal is unreachable right now; nothing was started. Retry in a moment.',
      },
    });
    const rows = await db.selectFrom('sessions').selectAll().where('organization_uuid', '=', org).execute();
    expect(rows).toEqual([]);
  }, 60_000);
});
