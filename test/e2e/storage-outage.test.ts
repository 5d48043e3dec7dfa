// Object store outage: the S3-compatible store goes away during a plan and comes back a few seconds
// later. The round's uploads are retried and the round completes; every artifact it reports is
// really there (nothing half-written is reported as done).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactStore, createS3Client } from '../../shared/infra/object-store';
import { startObjectStore, type ObjectStore } from '../../scripts/embedded/object-store';
import { freePort } from '../../scripts/embedded/ports';
import { driftReportSchema } from '../../shared/drift-report';
import { driftRoundWorkflowId } from '../../shared/ids';
import { driftRound } from '../../workflows';
import { roundProgressQuery } from '../../shared/messages';
import type { DriftTestBed } from '../support/drift-test-bed';
import {
  newTestBed,
  roundInput,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  untilActivityRunning,
} from '../support/stack';

describe('a round survives the object store going away for a while', () => {
  let dir: string;
  let port: number;
  let store: ObjectStore;
  let artifacts: ArtifactStore;
  let h: TemporalHarness;
  let bed: DriftTestBed;
  const bucket = 'kumoss-outage';
  const start = () => startObjectStore({ directory: dir, bucket, port });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kumoss-outage-'));
    port = await freePort();
    store = await start();
    artifacts = new ArtifactStore(
      createS3Client({ endpoint: store.endpoint, bucket, region: 'us-east-1' }),
      bucket,
    );
    h = await temporalHarness('storage-outage', testActivities({ artifacts }));
    bed = await newTestBed();
  });
  afterAll(async () => {
    await bed?.destroy();
    await h?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('store down during a plan, back 4 s later: the round completes and reports only what exists', async () => {
    await bed.inject('ingress');
    await bed.inject('attribute');
    const input = roundInput(bed.repoUrl, {
      mode: 'full',
      text: 'Reconcile everything.',
      heartbeat_timeout_seconds: 10,
    });
    const workflowId = driftRoundWorkflowId(input.session_id, input.round_id);
    const handle = await h.client.workflow.start(driftRound, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });
    await untilActivityRunning(handle, 'planIteration');
    await store.close();
    await new Promise((r) => setTimeout(r, 4000));
    store = await start();

    const result = await handle.result();
    expect(result.status).toBe('completed');
    const report = driftReportSchema.parse(JSON.parse(await artifacts.getText(result.report_key ?? '')));
    expect(report.outcome).toBe('Succeeded');
    const events = (await handle.fetchHistory()).events ?? [];
    const failedAttempts = events.filter(
      (e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1,
    ).length;
    expect(failedAttempts).toBeGreaterThan(0);
    // Every artifact the round lists exists.
    const progress = await handle.query(roundProgressQuery);
    expect(progress.artifacts.length).toBeGreaterThan(2);
    for (const key of progress.artifacts) await expect(artifacts.getText(key)).resolves.toBeDefined();
  });
});
