// Drift rounds end to end on the real stack: Temporal dev server, terraform, providers, git host,
// object store; the offline model provider.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DriftRoundInput, DriftRoundResult } from '../../shared/contracts';
import { driftReportSchema, type DriftReport } from '../../shared/drift-report';
import { driftRoundWorkflowId } from '../../shared/ids';
import { detectDrift, driftRound } from '../../workflows';
import { createDriftTestBed, DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  engineDeps,
  gitClient,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

describe('driftRound on the drift test bed', () => {
  let h: TemporalHarness;
  const beds: DriftTestBed[] = [];

  beforeAll(async () => {
    h = await temporalHarness('drift-round', testActivities());
  });
  afterAll(async () => {
    await Promise.all(beds.map((b) => b.destroy()));
    await h?.close();
  });

  async function bed(): Promise<DriftTestBed> {
    const b = await createDriftTestBed({
      gitHostUrl: stack().gitHostUrl,
      git: gitClient(),
      engine: engineDeps(),
    });
    beds.push(b);
    return b;
  }

  async function round(
    b: DriftTestBed,
    input: Partial<DriftRoundInput> & Pick<DriftRoundInput, 'mode' | 'text'>,
  ) {
    const session = `s-${randomUUID().slice(0, 8)}`;
    const roundId = 'r1';
    const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId: driftRoundWorkflowId(session, roundId),
      args: [
        {
          session_id: session,
          round_id: roundId,
          repository_url: b.repoUrl,
          cloud: 'aws',
          scope_id: 'scope-test',
          ...input,
        },
      ],
    });
    const report = result.report_key
      ? driftReportSchema.parse(JSON.parse(await artifactStore().getText(result.report_key)))
      : undefined;
    return { session, result, report };
  }

  async function detectOnBranch(b: DriftTestBed, branch: string) {
    return h.client.workflow.execute(detectDrift, {
      taskQueue: h.taskQueue,
      workflowId: `verify-${randomUUID()}`,
      args: [{ repositoryUrl: b.repoUrl, branch, scopeId: 'scope-test' }],
    });
  }

  it('full round fixes two drifted resources, reports Succeeded, and the pushed branch plans clean', async () => {
    const b = await bed();
    await b.inject('attribute');
    await b.inject('ingress');
    const { result, report } = await round(b, { mode: 'full', text: 'Reconcile everything in the root.' });
    expect(result.status).toBe('completed');
    expect(result.outcome).toBe('Succeeded');
    expect(report?.remediated_resources.map((r) => r.address)).toEqual([
      DRIFT_ADDRESSES.attribute,
      DRIFT_ADDRESSES.ingress,
    ]);
    expect(report).not.toHaveProperty('unreconciled_drift');
    expect(report).not.toHaveProperty('whitelisted_exceptions');
    const fresh = await detectOnBranch(b, result.branch);
    expect(fresh.drifted).toEqual([]);
    expect(fresh.hasChanges).toBe(false);
  });
});

export type { DriftReport };
