// The detect-and-remediate loop's stops, on stub activities (the fast tier: no Temporal, no engine):
// in sync at once, every operation excluded, no progress in an iteration, the iteration bound — and
// that a later iteration reads the plan its predecessor's last valid cycle left instead of planning.
import { describe, expect, it, vi } from 'vitest';

// Outside a workflow there is no activation to describe: the loop's progress details go nowhere.
vi.mock('@temporalio/workflow', () => ({ setCurrentDetails: () => undefined }));

const { detectAndRemediate } = await import('../../workflows/detect-and-remediate');
import type { GenerateOutput, IterationOutput, ValidateOutput } from '../../activities/drift-round';
import type { RoundRef } from '../../activities/workspace';

const ref: RoundRef = {
  sessionId: 's-1',
  roundId: 'r-1',
  repositoryUrl: 'https://git.example.com/infra.git',
  iacPath: '',
  scopeId: 'scope',
  cloud: 'aws',
  branch: 'kumoss/s-1',
};

const iteration = (i: string, o: Partial<IterationOutput> = {}): IterationOutput => ({
  inSync: false,
  driftCount: 2,
  operationCount: 2,
  whitelistedCount: 0,
  groupCount: 1,
  planKey: `plan-${i}`,
  reportKey: `report-${i}`,
  operationsKey: `ops-${i}`,
  whitelistedKey: `wl-${i}`,
  planned: true,
  reinitialized: false,
  ...o,
});

/** Stub activities: iterations answered in turn; every cycle changes code and validates as told. */
function stubs(iterations: Partial<IterationOutput>[], validates = true) {
  const planned: { iteration: string; planKey?: string }[] = [];
  let n = 0;
  let commit = 0;
  const acts = {
    planIteration: vi.fn((input: { iteration: string; planKey?: string }) => {
      planned.push({ iteration: input.iteration, ...(input.planKey ? { planKey: input.planKey } : {}) });
      return Promise.resolve(iteration(input.iteration, iterations[n++] ?? {}));
    }),
    generateRemediation: vi.fn((): Promise<GenerateOutput> =>
      Promise.resolve({
        changed: true,
        commit: `c${++commit}`,
        files: ['main.tf'],
        unremediableCount: 0,
        resultKey: `result-${commit}`,
      }),
    ),
    validateRemediation: vi.fn((input: { iteration: string; group: number }): Promise<ValidateOutput> =>
      Promise.resolve(
        validates
          ? { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false }
          : { valid: false, reinitialized: false, reason: 'Error: Unsupported argument' },
      ),
    ),
  };
  return { acts, planned };
}

const hooks = () => ({ setStatus: vi.fn(), onIteration: vi.fn(), addArtifact: vi.fn() });
const loop = (acts: ReturnType<typeof stubs>['acts'], maxIterations = 3) =>
  detectAndRemediate(acts, ref, [], { maxIterations, groupSize: 8 }, hooks());

describe('the detect-and-remediate loop', () => {
  it('stops at once when the plan is in sync', async () => {
    const { acts } = stubs([{ inSync: true, driftCount: 0, operationCount: 0, groupCount: 0 }]);
    const r = await loop(acts);
    expect(r).toMatchObject({ iterations: 1, stoppedBecause: 'in-sync', cycleResultKeys: [] });
    expect(acts.generateRemediation).not.toHaveBeenCalled();
  });

  it('stops when every operation is excluded: re-planning would only find the same drift', async () => {
    const { acts } = stubs([{ operationCount: 0, whitelistedCount: 2, groupCount: 0 }]);
    const r = await loop(acts);
    expect(r).toMatchObject({ iterations: 1, stoppedBecause: 'all-excluded', whitelistedKey: 'wl-1' });
    expect(acts.planIteration).toHaveBeenCalledTimes(1);
  });

  it('stops when no cycle of an iteration validates, leaving its operations unreconciled', async () => {
    const { acts } = stubs([{ groupCount: 2 }], false);
    const r = await loop(acts);
    expect(r).toMatchObject({ iterations: 1, stoppedBecause: 'no-progress', finalOperationsKey: 'ops-1' });
    expect(acts.generateRemediation).toHaveBeenCalledTimes(2);
    expect(r.head).toBe('c2');
  });

  it('reads the plan the last valid cycle left, and ends at the iteration bound with what is left', async () => {
    const { acts, planned } = stubs([{}, {}, {}, { inSync: false, operationCount: 1 }]);
    const r = await loop(acts, 3);
    expect(planned).toEqual([
      { iteration: '1' },
      { iteration: '2', planKey: 'validated-1-0' },
      { iteration: '3', planKey: 'validated-2-0' },
      { iteration: 'final', planKey: 'validated-3-0' },
    ]);
    expect(r).toMatchObject({
      iterations: 3,
      stoppedBecause: 'max-iterations',
      finalOperationsKey: 'ops-final',
    });
  });

  it('ends in sync when the last iteration’s change leaves nothing', async () => {
    const { acts } = stubs([{}, { inSync: true, operationCount: 0, groupCount: 0 }]);
    const r = await loop(acts, 1);
    expect(r).toMatchObject({ iterations: 1, stoppedBecause: 'in-sync' });
    expect(r.finalOperationsKey).toBeUndefined();
  });
});
