// A permanent engine error (a syntax error in the root) fails the round at once, with a reason a
// person can act on, instead of being retried.
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { ErrorTypes } from '../../shared/errors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driftRound } from '../../workflows';
import { type DriftTestBed } from '../support/drift-test-bed';
import {
  gitClient,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  newTestBed,
  roundInput,
} from '../support/stack';

describe('driftRound on a root that does not parse', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;

  beforeAll(async () => {
    h = await temporalHarness('drift-round-failure', testActivities());
    b = await newTestBed();
    appendFileSync(join(b.sourceDir, 'main.tf'), '\nresource "rest_object" "broken" {\n  path = \n}\n');
    await gitClient().run(['commit', '--quiet', '-am', 'Break the root'], b.sourceDir);
    await gitClient().run(['push', '--quiet', b.repoUrl, 'main'], b.sourceDir);
  });
  afterAll(async () => {
    await b?.destroy();
    await h?.close();
  });

  it('ends failed with the engine error, after a single attempt', async () => {
    const workflowId = `broken-${randomUUID()}`;
    const err = await h.client.workflow
      .execute(driftRound, {
        taskQueue: h.taskQueue,
        workflowId,
        args: [roundInput(b.repoUrl)],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const message = (err as WorkflowFailedError).cause?.message ?? '';
    expect(message).toMatch(
      /^Drift round failed: terraform (init|plan) failed: Error: Invalid expression \(main\.tf line \d+\)$/,
    );
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    const attempts = (history.events ?? [])
      .map((e) => e.activityTaskStartedEventAttributes?.attempt)
      .filter((a): a is number => typeof a === 'number');
    expect(Math.max(...attempts)).toBe(1);
  });

  it('fails the run, not its workflow task, when its input does not validate', async () => {
    const workflowId = `invalid-${randomUUID()}`;
    const err = await h.client.workflow
      .execute(driftRound, {
        taskQueue: h.taskQueue,
        workflowId,
        // What an older client, or a schema tightened since, might send: no retry makes it valid.
        args: [{ ...roundInput(b.repoUrl), max_drift_reports: 99 }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect(cause).toMatchObject({ type: ErrorTypes.InvalidInput, nonRetryable: true });
    expect(cause.message).toMatch(/^Invalid drift round input: max_drift_reports /);
    // The run ended on its first workflow task: nothing was scheduled, no task failed.
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    const types = (history.events ?? []).map((e) => e.eventType);
    expect(types).not.toContain(temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED);
    expect(types).not.toContain(temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED);
  });
});
