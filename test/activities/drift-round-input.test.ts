// A group's validation refuses what the workflow would never ask for, before it checks anything out:
// a commit that is not a commit id, and groups "planned with" it that do not come before it (a
// caller naming later groups would have their addresses planned at a commit that lacks them).
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { createDriftRoundActivities, type DriftRoundDeps } from '../../activities/drift-round';
import { ErrorTypes } from '../../shared/errors';
import type { CycleInput } from '../../shared/round-contracts';

function activities() {
  const reached: string[] = [];
  const refuse = (what: string) => () => {
    reached.push(what);
    throw new Error(`${what} was reached`);
  };
  const deps = {
    workspaces: { get: refuse('workspaces.get'), snapshot: refuse('workspaces.snapshot') },
    git: { run: refuse('git.run') },
    artifacts: { getText: refuse('artifacts.getText'), download: refuse('artifacts.download') },
    model: {},
    catalogue: {},
  } as unknown as DriftRoundDeps;
  return { acts: createDriftRoundActivities(deps), reached };
}

const cycle = (over: Partial<CycleInput>): CycleInput => ({
  ref: {
    sessionId: 's1',
    roundId: 'r1',
    repositoryUrl: 'https://git.example/repo.git',
    iacPath: '',
    scopeId: 'scope',
    cloud: 'aws',
    branch: 'kumoss/s1',
  },
  iteration: '1',
  group: 2,
  operationsKey: 'ops.json',
  groupSize: 10,
  targets: [],
  scope: 'group',
  commit: 'a'.repeat(40),
  ...over,
});

async function refusal(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('validateRemediation at a commit', () => {
  it.each([
    ['a later group', [1, 3]],
    ['the group itself', [2]],
    ['a negative group', [-1]],
    ['a fraction', [0.5]],
  ])('refuses %s planned with the group, before any checkout', async (_name, withGroups) => {
    const { acts, reached } = activities();
    const err = await refusal(acts.validateRemediation(cycle({ with: withGroups })));
    expect(err.type).toBe(ErrorTypes.InvalidInput);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain('come before it');
    expect(reached).toEqual([]);
  });

  it('refuses a commit that is not a commit id (an option git would read)', async () => {
    const { acts, reached } = activities();
    const err = await refusal(acts.validateRemediation(cycle({ commit: '--output=/tmp/x' })));
    expect(err.type).toBe(ErrorTypes.InvalidInput);
    expect(err.message).toContain('Not a commit id');
    expect(reached).toEqual([]);
  });

  it('checks out the commit when the groups planned with it come before it', async () => {
    const { acts, reached } = activities();
    await expect(acts.validateRemediation(cycle({ with: [0, 1] }))).rejects.toThrow(
      'workspaces.snapshot was reached',
    );
    expect(reached).toEqual(['workspaces.snapshot']);
  });
});
