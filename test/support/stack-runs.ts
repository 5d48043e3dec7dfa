// A stack's run on demand, as a test needs it: trigger the stack's schedule through the API and
// wait for the run after the ones already recorded, and for its workflow (webhooks, remediation).
import type { Client } from '@temporalio/client';
import { expect } from 'vitest';
import { stackScheduleId } from '../../shared/stack-contracts';
import type { TestApi } from './api';

export interface StackRun {
  run_id: string;
  status: string;
  drift_count: number;
  opened: number;
  resolved: number;
  whitelisted: number;
  error: string | null;
  session_id: string | null;
}

/** Triggers the stack's schedule and waits for the run after the ones already recorded. */
export async function triggerStackRun(
  api: TestApi,
  client: Client,
  tokens: { developer: string; devops: string },
  id: string,
): Promise<StackRun> {
  const earlier = (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body
    .runs as StackRun[];
  const before = earlier.length;
  // A run's workflow id ends in the second it was triggered (the schedule appends it): a trigger
  // in the same second as the last run would reuse that id and start nothing. Wait for the next.
  const lastSecond = earlier[0]?.run_id.slice(-20, -1);
  if (lastSecond) {
    await expect
      .poll(() => new Date().toISOString().slice(0, 19) > lastSecond, { timeout: 5_000, interval: 50 })
      .toBe(true);
  }
  const schedule = client.schedule.getHandle(stackScheduleId(id));
  const skipped = async () => (await schedule.describe()).info.numActionsSkippedOverlap;
  let skippedBefore = await skipped();
  expect((await api.call('POST', `/api/v1/stacks/${id}/trigger`, tokens.devops, {})).status).toBe(202);
  let polls = 0;
  let latest: StackRun | undefined;
  await expect
    .poll(
      async () => {
        const runs = (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body
          .runs as StackRun[];
        polls += 1;
        // A trigger that found a run still closing was skipped (overlap skip): trigger again —
        // only then, as the schedule counts it; a trigger merely slow to start (a loaded machine)
        // must not be doubled, or the extra run lands inside the test's next step.
        if (runs.length === before && polls % 25 === 0) {
          const now = await skipped();
          if (now > skippedBefore) {
            skippedBefore = now;
            await api.call('POST', `/api/v1/stacks/${id}/trigger`, tokens.devops, {});
          }
        }
        latest = runs.length > before && runs[0]?.status !== 'running' ? runs[0] : undefined;
        return latest !== undefined;
      },
      { timeout: 180_000, interval: 200, message: 'the triggered run did not finish' },
    )
    .toBe(true);
  // The run is recorded before its webhooks and its auto-remediation: wait for its workflow.
  const runId = latest!.run_id;
  await client.workflow
    .getHandle(runId)
    .result()
    .catch(() => undefined);
  const after = (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body
    .runs as StackRun[];
  return after.find((r) => r.run_id === runId)!;
}
