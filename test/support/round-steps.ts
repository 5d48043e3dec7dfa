// A drift round's first steps run as activities directly (MockActivityEnvironment), for the
// activity tests that go on from there: a new session's round prepared and its iteration 1 planned.
import { randomUUID } from 'node:crypto';
import type { MockActivityEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { RoundRef } from '../../activities/workspace';
import type { IterationOutput } from '../../shared/round-contracts';
import type { DriftTestBed } from './drift-test-bed';

/** A round of a new session on `bed`: prepared, iteration 1 planned in groups of `groupSize`. */
export async function firstIteration(
  bed: DriftTestBed,
  acts: Activities,
  env: MockActivityEnvironment,
  groupSize: number,
): Promise<{ ref: RoundRef; det: IterationOutput }> {
  const session = `s-${randomUUID().slice(0, 8)}`;
  const ref: RoundRef = {
    sessionId: session,
    roundId: 'r1',
    repositoryUrl: bed.repoUrl,
    iacPath: '',
    scopeId: 'scope-test',
    cloud: 'aws',
    branch: `kumoss/${session}`,
  };
  await env.run((i: Parameters<typeof acts.prepareRound>[0]) => acts.prepareRound(i), {
    ref,
    text: 'Reconcile everything.',
  });
  const det: IterationOutput = await env.run(
    (i: Parameters<typeof acts.planIteration>[0]) => acts.planIteration(i),
    { ref, iteration: '1', targets: [], groupSize },
  );
  return { ref, det };
}
