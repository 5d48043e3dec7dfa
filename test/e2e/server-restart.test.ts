// Server restart: the Temporal dev server (SQLite file) is stopped and started again while a round
// runs; the round completes. While the server is down the API answers 503 with a clear message;
// requests answered 202 before the outage are not lost.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/embedded/ports';
import { loadDevServerSpec, startDevServer, type DevServer } from '../../scripts/embedded/temporal-dev';
import { driftReportSchema } from '../../shared/drift-report';
import { driftRoundWorkflowId } from '../../shared/ids';
import { driftRound } from '../../workflows';
import { createWorker, type KumossWorker } from '../../worker/worker';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import type { DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  newTestBed,
  roundInput,
  stack,
  testActivities,
  untilActivityRunning,
} from '../support/stack';
import { createDb, migrate, type Db } from '../../shared/infra/db';

describe('a round survives a Temporal server restart', () => {
  let dir: string;
  let spec: ReturnType<typeof loadDevServerSpec>;
  let server: DevServer;
  let native: NativeConnection;
  let connection: Connection;
  let client: Client;
  let worker: KumossWorker;
  let running: Promise<void>;
  let api: TestApi;
  let db: Db;
  let tokens: Record<string, string>;
  const beds: DriftTestBed[] = [];
  const queue = 'restart';

  const start = () => startDevServer(spec, { dataDir: dir });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kumoss-restart-'));
    spec = {
      ...loadDevServerSpec(),
      port: await freePort(),
      http_port: await freePort(),
      db_filename: join(dir, 'temporal.sqlite'),
      headless: true,
    };
    server = await start();
    native = await NativeConnection.connect({ address: server.address });
    connection = await Connection.connect({ address: server.address });
    client = new Client({ connection });
    worker = await createWorker({
      connection: native,
      namespace: 'default',
      taskQueue: queue,
      activities: testActivities(),
      workflowBundlePath: stack().workflowBundlePath,
    });
    running = worker.run();
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'restart');
    api = await startTestApi({ client, taskQueue: queue }, db);
  });
  afterAll(async () => {
    api?.close();
    worker?.shutdown();
    await running?.catch(() => undefined);
    await Promise.all(beds.map((b) => b.destroy()));
    await connection?.close();
    await native?.close();
    await server?.stop();
    await db?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stop and start during a plan: the round completes; 503 meanwhile; 202s before are kept', async () => {
    const bed = await newTestBed();
    beds.push(bed);
    await bed.inject('ingress');
    await bed.inject('attribute');
    const input = roundInput(bed.repoUrl, {
      mode: 'full',
      text: 'Reconcile everything.',
      heartbeat_timeout_seconds: 10,
    });
    const handle = await client.workflow.start(driftRound, {
      taskQueue: queue,
      workflowId: driftRoundWorkflowId(input.session_id, input.round_id),
      args: [input],
    });
    // A session answered 202 before the outage.
    const other = await newTestBed();
    beds.push(other);
    const accepted = await api.call('POST', '/api/v1/drift/full', tokens.devops, {
      repository_url: other.repoUrl,
      cloud: 'aws',
      scope_id: '123456789012',
      text: 'Reconcile everything.',
    });
    expect(accepted.status).toBe(202);

    await untilActivityRunning(handle, 'planIteration');
    await server.stop();

    const down = await api.call('POST', '/api/v1/drift/full', tokens.devops, {
      repository_url: other.repoUrl,
      cloud: 'aws',
      scope_id: '123456789012',
      text: 'Reconcile everything.',
    });
    expect(down.status).toBe(503);
    expect((down.body.error as { message: string }).message).toMatch(/Temporal is unreachable/);

    server = await start();
    const result = await handle.result();
    expect(result.status).toBe('completed');
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.outcome).toBe('Succeeded');
    const kept = await waitForSession(api, tokens.developer ?? '', String(accepted.body.session_id), 1);
    expect(kept.rounds).toHaveLength(1);
  });
});
