// Claim check: plans and reports travel as object keys, never through workflow history. A round on
// a root whose plan covers 5,000 resources keeps its whole history under 1 MB.
import { execFileSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundArtifactKey } from '../../shared/ids';
import { driftRound } from '../../workflows';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  gitClient,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  newTestBed,
  roundInput,
} from '../support/stack';

describe('claim check on a 5,000-resource plan', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;

  beforeAll(async () => {
    h = await temporalHarness('claim-check', testActivities());
    b = await newTestBed();
    // 5,000 more resources in the root (planned, not yet applied: the plan covers all of them).
    appendFileSync(
      join(b.sourceDir, 'bulk.tf'),
      'resource "terraform_data" "bulk" {\n  count = 5000\n  input = { index = count.index, tier = "bulk", owner = "platform-team" }\n}\n',
    );
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: b.sourceDir, env: gitClient().env(), stdio: 'pipe' });
    git('add', '--all');
    git('commit', '--quiet', '-m', 'Add 5,000 resources');
    git('push', '--quiet', b.repoUrl, 'main');
  });
  afterAll(async () => {
    await b?.destroy();
    await h?.close();
  });

  it('keeps the history of the round under 1 MB while the plan is several MB', async () => {
    await b.inject('ingress');
    const input = roundInput(b.repoUrl);
    const session = input.session_id;
    const workflowId = `claim-check-${session}`;
    const result = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });
    expect(result.remediated).toEqual([DRIFT_ADDRESSES.ingress]);
    const planJson = await artifactStore().getText(roundArtifactKey(session, 'r1', 'iteration-1/plan.json'));
    const plan = JSON.parse(planJson) as { resource_changes: unknown[] };
    expect(plan.resource_changes.length).toBeGreaterThanOrEqual(5000);
    expect(Buffer.byteLength(planJson)).toBeGreaterThan(2 * 1024 * 1024);

    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    const bytes = temporal.api.history.v1.History.encode(history).finish().length;
    expect(bytes).toBeLessThan(1024 * 1024);
    console.log(
      `[claim check] plan.json ${(Buffer.byteLength(planJson) / 1048576).toFixed(1)} MiB, history ${(bytes / 1024).toFixed(1)} KiB`,
    );
  }, 600_000);
});
