// Git fault: someone pushes to the session branch while a round works on it. The round's push is
// rejected; the round fails at once (no retries) with a reason a person can act on, and the other
// person's commit stays the tip of the branch — Kumoss never force-pushes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driftRoundWorkflowId, sessionBranch } from '../../shared/ids';
import { driftRound } from '../../workflows';
import type { DriftTestBed } from '../support/drift-test-bed';
import {
  gitClient,
  newTestBed,
  roundInput,
  temporalHarness,
  testActivities,
  untilActivityRunning,
  type TemporalHarness,
} from '../support/stack';

describe('a session branch that moves under a round', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;
  let other: string;

  beforeAll(async () => {
    h = await temporalHarness('branch-moved', testActivities());
    b = await newTestBed();
    other = mkdtempSync(join(tmpdir(), 'kumoss-other-'));
  });
  afterAll(async () => {
    await b?.destroy();
    await h?.close();
    rmSync(other, { recursive: true, force: true });
  });

  it('fails the round at once with the moved-branch reason and leaves the other commit in place', async () => {
    await b.inject('ingress');
    const input = roundInput(b.repoUrl, { mode: 'full', text: 'Reconcile everything.' });
    const branch = sessionBranch(input.session_id);
    const git = gitClient();
    // The session branch exists (an earlier round); this round continues it.
    await git.run(['push', '--quiet', b.repoUrl, `main:refs/heads/${branch}`], b.sourceDir);
    const workflowId = driftRoundWorkflowId(input.session_id, input.round_id);
    const handle = await h.client.workflow.start(driftRound, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });

    // While the round plans (its checkout is made), a person pushes to the same branch.
    await untilActivityRunning(handle, 'planIteration');
    await git.checkout({ url: b.repoUrl, dir: join(other, 'co'), branch });
    writeFileSync(join(other, 'co', 'NOTES.md'), 'a person was here\n');
    await git.commitAll(join(other, 'co'), 'A change by a person');
    await git.push(join(other, 'co'), branch);
    const theirs = await git.head(join(other, 'co'));

    const err = await handle.result().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    // The round's failure carries the activity's reason.
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).message).toContain(
      `The branch ${branch} moved on the remote while Kumoss worked on it (someone else pushed to it); Kumoss does not overwrite it.`,
    );
    expect((await git.remoteBranches(b.repoUrl)).get(branch)).toBe(theirs);
    const events = (await handle.fetchHistory()).events ?? [];
    const retried = events.some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1);
    expect(retried).toBe(false);
  });
});
