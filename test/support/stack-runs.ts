// A stack's run on demand, as a test needs it: trigger the stack's schedule through the API and
// wait for the run it started, and for its workflow (webhooks, remediation).
import type { Client } from '@temporalio/client';
import { expect } from 'vitest';
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

/** Triggers the stack's schedule and waits for the run it started to finish. */
export async function triggerStackRun(
  api: TestApi,
  client: Client,
  tokens: { developer: string; devops: string },
  id: string,
): Promise<StackRun> {
  // A run now answers the run it started (202), or 409 while a run of the stack is still going —
  // the last run's workflow closes after its row says it finished.
  let runId = '';
  await expect
    .poll(
      async () => {
        const r = await api.call('POST', `/api/v1/stacks/${id}/trigger`, tokens.devops, {});
        if (r.status === 202) runId = r.body.run_id as string;
        else expect(r.status, JSON.stringify(r.body)).toBe(409);
        return runId;
      },
      { timeout: 60_000, interval: 100, message: 'the stack stayed busy' },
    )
    .not.toBe('');
  await expect
    .poll(
      async () => {
        const runs = (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body
          .runs as StackRun[];
        const run = runs.find((r) => r.run_id === runId);
        return run !== undefined && run.status !== 'running';
      },
      { timeout: 180_000, interval: 200, message: 'the triggered run did not finish' },
    )
    .toBe(true);
  // The run is recorded before its webhooks and its auto-remediation: wait for its workflow.
  await client.workflow
    .getHandle(runId)
    .result()
    .catch(() => undefined);
  const after = (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body
    .runs as StackRun[];
  return after.find((r) => r.run_id === runId)!;
}
