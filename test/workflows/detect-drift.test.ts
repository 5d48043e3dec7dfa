// Proof (a): a workflow on the real dev server runs an activity that runs real init, plan -out and
// show -json on the test bed and returns exactly the drifted addresses.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectDrift } from '../../workflows';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  ENGINES,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  newTestBed,
} from '../support/stack';

describe.each(ENGINES)('detectDrift workflow on the drift test bed (%s)', (engine) => {
  let h: TemporalHarness;
  const beds: DriftTestBed[] = [];

  beforeAll(async () => {
    h = await temporalHarness(`detect-drift-${engine}`, testActivities(engine));
  });
  afterAll(async () => {
    await Promise.all(beds.map((b) => b.destroy()));
    await h?.close();
  });

  async function bed(): Promise<DriftTestBed> {
    const b = await newTestBed({ engine });
    beds.push(b);
    return b;
  }

  async function detect(b: DriftTestBed) {
    return h.client.workflow.execute(detectDrift, {
      taskQueue: h.taskQueue,
      workflowId: `test-detect-${randomUUID()}`,
      args: [{ repositoryUrl: b.repoUrl, scopeId: 'scope-test' }],
    });
  }

  it('reports no drift when nothing was changed out of band', async () => {
    const b = await bed();
    const result = await detect(b);
    expect(result.drifted).toEqual([]);
    expect(result.hasChanges).toBe(false);
  });

  it('reports exactly the injected drift: changed attribute, extra ingress rule, deleted file', async () => {
    const b = await bed();
    await b.inject('attribute');
    await b.inject('ingress');
    await b.inject('file');
    const result = await detect(b);
    expect(result.drifted).toEqual(
      [DRIFT_ADDRESSES.attribute, DRIFT_ADDRESSES.ingress, DRIFT_ADDRESSES.file].sort(),
    );
    // The plan travelled by key: it is in object storage, not in the workflow result.
    const planJson = JSON.parse(await artifactStore().getText(result.planJsonKey)) as {
      resource_drift: unknown[];
    };
    expect(planJson.resource_drift).toHaveLength(3);
  });

  it('reports only the injected resource when one thing drifted', async () => {
    const b = await bed();
    await b.inject('ingress');
    const result = await detect(b);
    expect(result.drifted).toEqual([DRIFT_ADDRESSES.ingress]);
  });
});
