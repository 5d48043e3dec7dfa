// The detect-and-remediate loop's stops, on stub activities (the fast tier: no Temporal, no engine):
// in sync at once, every operation excluded, no progress in an iteration, the iteration bound — and
// that a later iteration reads the plan its predecessor's last valid cycle left instead of planning;
// groups before an iteration's last validated by targeted plans, then one plan of the whole root.
import { describe, expect, it, vi } from 'vitest';

// Outside a workflow there is no activation to describe: the loop's progress details go nowhere,
// and the loop runs as a new round does (past every patch) unless a test replays an older one.
const patches = vi.hoisted(() => ({ unpatched: new Set<string>() }));
vi.mock('@temporalio/workflow', () => ({
  setCurrentDetails: () => undefined,
  patched: (id: string) => !patches.unpatched.has(id),
}));

const {
  detectAndRemediate,
  BATCHED_GROUP_PLANS,
  LEFTOVER_GROUPS,
  PROPOSALS_AT_ONCE,
  PROPOSALS_COMMITTED_TOGETHER,
} = await import('../../workflows/detect-and-remediate');
import type { GenerateOutput, ValidateOutput } from '../../activities/drift-round';
import type {
  CommitProposalsInput,
  ConfirmInput,
  ConfirmOutput,
  IterationOutput,
  ProposeInput,
  ProposeOutput,
  TakeBackInput,
  TakeBackOutput,
} from '../../shared/round-contracts';
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

/**
 * Stub activities: iterations answered in turn; no group's change proposed ahead (as when every
 * request for one failed); every cycle changes code and validates as told;
 * the whole root's plan after several groups answers `confirm` (default: it plans). A generation
 * answers after the other work already under way has had its turn (a validation that answers at
 * once has answered), as the worker's would.
 */
function stubs(
  iterations: Partial<IterationOutput>[],
  validates = true,
  confirm: (input: ConfirmInput) => Partial<ConfirmOutput> = () => ({}),
) {
  const planned: { iteration: string; planKey?: string; planClean?: boolean }[] = [];
  let n = 0;
  let commit = 0;
  let generated = 0;
  const waiting: { n: number; resolve: () => void }[] = [];
  /**
   * Settles once generation `n` (from 1) has answered and the loop has gone on from it (a turn
   * later): what a stub validation waits for to end at a known point of the generation, whatever
   * the machine's load.
   */
  const afterGeneration = (count: number) =>
    new Promise<void>((resolve) => {
      if (generated >= count) setImmediate(resolve);
      else waiting.push({ n: count, resolve: () => setImmediate(resolve) });
    });
  /** A cycle's change committed (by its own cycle or with the proposed ones). */
  const generateOne = async (): Promise<GenerateOutput> => {
    const c = ++commit;
    await new Promise((resolve) => setImmediate(resolve));
    generated += 1;
    for (const w of waiting.filter((x) => x.n <= generated)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
    return {
      changed: true,
      commit: `c${c}`,
      files: ['main.tf'],
      unremediableCount: 0,
      resultKey: `result-${c}`,
    };
  };
  const acts = {
    planIteration: vi.fn((input: { iteration: string; planKey?: string; planClean?: boolean }) => {
      planned.push({
        iteration: input.iteration,
        ...(input.planKey ? { planKey: input.planKey } : {}),
        ...(input.planClean ? { planClean: input.planClean } : {}),
      });
      return Promise.resolve(iteration(input.iteration, iterations[n++] ?? {}));
    }),
    proposeRemediations: vi.fn((_input: ProposeInput): Promise<ProposeOutput> =>
      Promise.resolve({ proposed: [] }),
    ),
    commitProposals: vi.fn(async (input: CommitProposalsInput): Promise<GenerateOutput[]> => {
      const out: GenerateOutput[] = [];
      for (const _g of input.groups) out.push(await generateOne());
      return out;
    }),
    generateRemediation: vi.fn((_input?: { group: number; proposal?: boolean }) => generateOne()),
    validateRemediation: vi.fn(
      (input: {
        iteration: string;
        group: number;
        commit?: string;
        with?: number[];
      }): Promise<ValidateOutput> =>
        Promise.resolve(
          validates
            ? { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false }
            : { valid: false, reinitialized: false, reason: 'Error: Unsupported argument' },
        ),
    ),
    confirmIteration: vi.fn((input: ConfirmInput): Promise<ConfirmOutput> =>
      Promise.resolve({
        planKey: `confirmed-${input.iteration}`,
        reinitialized: false,
        head: `h${input.iteration}`,
        reverted: [],
        ...confirm(input),
      }),
    ),
    takeBackGroups: vi.fn((input: TakeBackInput): Promise<TakeBackOutput> =>
      Promise.resolve({ head: `tb${input.iteration}`, takenBack: input.invalid }),
    ),
  };
  return { acts, planned, afterGeneration };
}

/**
 * Validations that each end once `wait` settles (default: a moment) and plan as `plans(group)`
 * says; `began` sees each as it begins. Answers how many ran at once at most.
 */
function slowValidations(
  acts: ReturnType<typeof stubs>['acts'],
  plans: (group: number) => boolean,
  began: (input: { group: number; with?: number[] }) => void = () => undefined,
  wait: (input: { group: number; with?: number[] }) => Promise<unknown> = () =>
    new Promise((resolve) => setTimeout(resolve, 5)),
) {
  let running = 0;
  let most = 0;
  acts.validateRemediation.mockImplementation(async (input: { group: number; iteration: string }) => {
    began(input);
    running += 1;
    most = Math.max(most, running);
    await wait(input);
    running -= 1;
    return plans(input.group)
      ? { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false }
      : { valid: false, reinitialized: false, reason: 'Error: Unsupported argument' };
  });
  return () => most;
}

/** Generation `n` (from 1) answers only once `release` is called. */
function holdGeneration(acts: ReturnType<typeof stubs>['acts'], n: number): () => void {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const generate = acts.generateRemediation.getMockImplementation();
  acts.generateRemediation.mockImplementation(async () => {
    if (acts.generateRemediation.mock.calls.length === n) await gate;
    return (await generate?.({ group: 0 })) as GenerateOutput;
  });
  return () => release();
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
    // The first group's change taken back after the cycles, the second's by its own validation.
    expect(acts.takeBackGroups.mock.calls[0]?.[0].invalid).toEqual([0]);
    expect(r.head).toBe('tb1');
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

  it('validates the groups before the last by targeted plans, then all changes by one plan of the whole root', async () => {
    const { acts, planned } = stubs([{ groupCount: 3 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    const r = await loop(acts);
    // Each in a checkout of its own cycle's commit.
    expect(acts.validateRemediation.mock.calls.map(([c]) => c)).toEqual([
      expect.objectContaining({ group: 0, scope: 'group', commit: 'c1' }),
      expect.objectContaining({ group: 1, scope: 'group', commit: 'c2' }),
    ]);
    expect(acts.takeBackGroups).not.toHaveBeenCalled();
    expect(acts.confirmIteration).toHaveBeenCalledTimes(1);
    expect(acts.confirmIteration.mock.calls[0]?.[0]).toMatchObject({
      iteration: '1',
      operationsKey: 'ops-1',
      groups: [
        { group: 0, commit: 'c1' },
        { group: 1, commit: 'c2' },
        { group: 2, commit: 'c3' },
      ],
    });
    expect(acts.confirmIteration.mock.calls[0]?.[0].ref.head).toBe('c3');
    // Only the last group's change has no plan of its own behind it.
    expect(acts.confirmIteration.mock.calls[0]?.[0].unplanned).toEqual([2]);
    // The next iteration reads the whole root's plan, at the commit the step left.
    expect(planned).toEqual([{ iteration: '1' }, { iteration: '2', planKey: 'confirmed-1' }]);
    expect(r).toMatchObject({ iterations: 2, stoppedBecause: 'in-sync', head: 'h1' });
  });

  it('tells the next iteration when the plan it reads changes nothing (no need to read it)', async () => {
    // The whole root's plan after three groups changes nothing; a lone change's plan in the next
    // round of the loop changes something; the final examination reads a plan that changes nothing.
    const { acts, planned } = stubs(
      [{ groupCount: 3 }, { groupCount: 1 }, { groupCount: 1 }, { inSync: true, operationCount: 0 }],
      true,
      () => ({ planClean: true }),
    );
    acts.validateRemediation
      .mockResolvedValueOnce({ valid: true, planKey: 'targeted-0', planClean: true, reinitialized: false })
      .mockResolvedValueOnce({ valid: true, planKey: 'targeted-1', planClean: true, reinitialized: false })
      .mockResolvedValueOnce({ valid: true, planKey: 'whole-2', planClean: false, reinitialized: false })
      .mockResolvedValueOnce({ valid: true, planKey: 'whole-3', planClean: true, reinitialized: false });
    await loop(acts, 3);
    expect(planned).toEqual([
      { iteration: '1' },
      { iteration: '2', planKey: 'confirmed-1', planClean: true },
      { iteration: '3', planKey: 'whole-2' },
      { iteration: 'final', planKey: 'whole-3', planClean: true },
    ]);
  });

  it('validates a lone change with the whole root at once: no targeted plan, no second plan', async () => {
    const { acts } = stubs([{ groupCount: 1 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    await loop(acts);
    expect(acts.validateRemediation).toHaveBeenCalledTimes(1);
    expect(acts.validateRemediation.mock.calls[0]?.[0]).not.toHaveProperty('scope');
    expect(acts.confirmIteration).not.toHaveBeenCalled();
  });

  it("validates a group's commit while the next group generates: its plan does not wait for it", async () => {
    const { acts } = stubs([{ groupCount: 3 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    const generate = acts.generateRemediation.getMockImplementation();
    let secondStarted: () => void = () => undefined;
    const second = new Promise<void>((resolve) => (secondStarted = resolve));
    const seen = { generate1Ended: false, validate0Ended: false, overlapped: [] as string[] };
    acts.generateRemediation.mockImplementation(async () => {
      const n = acts.generateRemediation.mock.calls.length;
      if (n === 2) {
        if (!seen.validate0Ended) seen.overlapped.push('group 2 generated before group 1 validated');
        secondStarted();
      }
      const out = (await generate?.({ group: 0 })) as GenerateOutput;
      if (n === 2) seen.generate1Ended = true;
      return out;
    });
    acts.validateRemediation.mockImplementation(async (input: { group: number; iteration: string }) => {
      if (input.group === 0) {
        if (!seen.generate1Ended) seen.overlapped.push('group 1 validated before group 2 generated');
        // Answered only once the next group's generation has begun: a loop that waited for this
        // plan before generating the next group would never end.
        await second;
        seen.validate0Ended = true;
      }
      return { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false };
    });
    await loop(acts);
    expect(seen.overlapped).toEqual([
      'group 2 generated before group 1 validated',
      'group 1 validated before group 2 generated',
    ]);
    expect(acts.confirmIteration.mock.calls[0]?.[0].groups).toHaveLength(3);
  });

  it('runs the groups’ targeted plans one after another', async () => {
    const { acts, afterGeneration } = stubs([
      { groupCount: 6 },
      { inSync: true, operationCount: 0, groupCount: 0 },
    ]);
    // Group 1's plan ends once groups 2 to 5 are committed; the last group generates until the
    // plan of groups 2 to 5 has begun.
    const release = holdGeneration(acts, 6);
    const most = slowValidations(
      acts,
      () => true,
      (input) => input.with && release(),
      (input) => (input.group === 0 ? afterGeneration(5) : Promise.resolve()),
    );
    await loop(acts);
    // Groups 2 to 5 committed while group 1's plan ran: one plan of their addresses, at group 5's
    // commit (which holds them all).
    expect(acts.validateRemediation.mock.calls.map(([c]) => c)).toEqual([
      expect.objectContaining({ group: 0, commit: 'c1' }),
      expect.objectContaining({ group: 4, commit: 'c5', with: [1, 2, 3] }),
    ]);
    expect(acts.validateRemediation.mock.calls[0]?.[0]).not.toHaveProperty('with');
    expect(most()).toBe(1);
  });

  /** Five groups whose first targeted plan ends only once the last group is generated. */
  const firstPlanOutlastsGeneration = () => {
    const { acts, afterGeneration } = stubs([
      { groupCount: 5 },
      { inSync: true, operationCount: 0, groupCount: 0 },
    ]);
    slowValidations(
      acts,
      () => true,
      () => undefined,
      () => afterGeneration(5),
    );
    return acts;
  };

  it('leaves to the whole root the changes whose targeted plans had not begun when generation ended', async () => {
    const acts = firstPlanOutlastsGeneration();
    await loop(acts);
    // Groups 2 to 5 committed while group 1's plan ran, and then nothing was left to generate: a
    // plan of their addresses would only have delayed the whole root's, which validates them.
    expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit, c.with])).toEqual([
      [0, 'c1', undefined],
    ]);
    expect(acts.confirmIteration.mock.calls[0]?.[0]).toMatchObject({
      groups: [0, 1, 2, 3, 4].map((g) => ({ group: g, commit: `c${g + 1}` })),
      unplanned: [1, 2, 3, 4],
    });
  });

  it('plans the changes left when generation ended before the whole root, in a round recorded so', async () => {
    patches.unpatched.add(LEFTOVER_GROUPS);
    try {
      const acts = firstPlanOutlastsGeneration();
      await loop(acts);
      expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit, c.with])).toEqual([
        [0, 'c1', undefined],
        [3, 'c4', [1, 2]],
      ]);
      expect(acts.confirmIteration.mock.calls[0]?.[0]).not.toHaveProperty('unplanned');
    } finally {
      patches.unpatched.delete(LEFTOVER_GROUPS);
    }
  });

  it('plans each group on its own, one after another, in a round recorded before batching', async () => {
    patches.unpatched.add(BATCHED_GROUP_PLANS);
    try {
      const { acts } = stubs([{ groupCount: 5 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
      const most = slowValidations(acts, (group) => group !== 2);
      await loop(acts);
      expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit, c.with])).toEqual([
        [0, 'c1', undefined],
        [1, 'c2', undefined],
        [2, 'c3', undefined],
        [3, 'c4', undefined],
      ]);
      expect(most()).toBe(1);
      expect(acts.takeBackGroups.mock.calls[0]?.[0].invalid).toEqual([2]);
    } finally {
      patches.unpatched.delete(BATCHED_GROUP_PLANS);
    }
  });

  it('plans each group again at its own commit when the groups planned together do not plan', async () => {
    const { acts, afterGeneration } = stubs([
      { groupCount: 5 },
      { inSync: true, operationCount: 0, groupCount: 0 },
    ]);
    // Group 1's plan ends once groups 2 to 4 are committed; the last group generates until the
    // plan of groups 2 to 4 has begun.
    const release = holdGeneration(acts, 5);
    acts.validateRemediation.mockImplementation(
      async (input: { group: number; iteration: string; with?: number[] }) => {
        if (input.with) release();
        if (input.group === 0) await afterGeneration(4);
        // Group 3's change does not plan: the plan of groups 2 to 4 fails, and so does group 4's
        // own (its commit holds group 3's change).
        const broken = [...(input.with ?? []), input.group].includes(2) || (input.group === 3 && !input.with);
        return broken
          ? { valid: false, reinitialized: false, reason: 'Error: Unsupported argument' }
          : { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false };
      },
    );
    await loop(acts);
    expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit, c.with])).toEqual([
      [0, 'c1', undefined],
      [3, 'c4', [1, 2]],
      [1, 'c2', undefined],
      [2, 'c3', undefined],
      [3, 'c4', undefined],
    ]);
    expect(acts.takeBackGroups.mock.calls[0]?.[0].invalid).toEqual([2, 3]);
    expect(acts.confirmIteration.mock.calls[0]?.[0].groups).toEqual([
      { group: 0, commit: 'c1' },
      { group: 1, commit: 'c2' },
      { group: 4, commit: 'c5' },
    ]);
  });

  it('takes back the changes whose targeted plans failed, then plans the whole root with the rest', async () => {
    const { acts } = stubs([{ groupCount: 3 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    acts.validateRemediation.mockImplementationOnce(() =>
      Promise.resolve({ valid: false, reinitialized: false, reason: 'Error: Unsupported argument' }),
    );
    await loop(acts);
    expect(acts.takeBackGroups).toHaveBeenCalledTimes(1);
    expect(acts.takeBackGroups.mock.calls[0]?.[0]).toMatchObject({
      iteration: '1',
      operationsKey: 'ops-1',
      groups: [
        { group: 0, commit: 'c1' },
        { group: 1, commit: 'c2' },
        { group: 2, commit: 'c3' },
      ],
      invalid: [0],
    });
    expect(acts.takeBackGroups.mock.calls[0]?.[0].ref.head).toBe('c3');
    expect(acts.confirmIteration.mock.calls[0]?.[0].groups).toEqual([
      { group: 1, commit: 'c2' },
      { group: 2, commit: 'c3' },
    ]);
    // The whole root's plan starts from the commit the take-back left.
    expect(acts.confirmIteration.mock.calls[0]?.[0].ref.head).toBe('tb1');
  });

  it('validates the one change left after a take-back with the whole root', async () => {
    const { acts } = stubs([{ groupCount: 3 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    acts.validateRemediation.mockImplementation(
      (input: { group: number; iteration: string; scope?: string }) =>
        Promise.resolve(
          input.scope === 'group'
            ? { valid: false, reinitialized: false, reason: 'Error: Unsupported argument' }
            : { valid: true, planKey: `validated-${input.iteration}-${input.group}`, reinitialized: false },
        ),
    );
    // The second group's change did not revert apart from the first's: both are taken back.
    acts.takeBackGroups.mockImplementationOnce((input: TakeBackInput) =>
      Promise.resolve({ head: 'tb1', takenBack: input.invalid }),
    );
    const r = await loop(acts);
    expect(acts.takeBackGroups.mock.calls[0]?.[0].invalid).toEqual([0, 1]);
    expect(acts.confirmIteration).not.toHaveBeenCalled();
    expect(acts.validateRemediation.mock.calls.at(-1)?.[0]).toMatchObject({ group: 2, ref: { head: 'tb1' } });
    expect(acts.validateRemediation.mock.calls.at(-1)?.[0]).not.toHaveProperty('scope');
    expect(r).toMatchObject({ iterations: 2, stoppedBecause: 'in-sync' });
  });

  it("asks for every group's change at once, then commits them in one step with one plan of the whole root", async () => {
    const { acts } = stubs([{ groupCount: 4 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    acts.proposeRemediations.mockResolvedValue({ proposed: [0, 1, 2, 3] });
    const r = await loop(acts);
    expect(acts.proposeRemediations).toHaveBeenCalledTimes(1);
    expect(acts.proposeRemediations.mock.calls[0]?.[0]).toMatchObject({
      iteration: '1',
      operationsKey: 'ops-1',
      groupSize: 8,
    });
    // After the proposals, one step commits them all; no cycle of its own.
    expect(acts.proposeRemediations.mock.invocationCallOrder[0]).toBeLessThan(
      acts.commitProposals.mock.invocationCallOrder[0] as number,
    );
    expect(acts.commitProposals.mock.calls.map(([c]) => c.groups)).toEqual([[0, 1, 2, 3]]);
    expect(acts.commitProposals.mock.calls[0]?.[0]).not.toHaveProperty('group');
    expect(acts.generateRemediation).not.toHaveBeenCalled();
    // Committing a proposal hides no targeted plan: the whole root's plan validates them all.
    expect(acts.validateRemediation).not.toHaveBeenCalled();
    expect(acts.confirmIteration.mock.calls[0]?.[0]).toMatchObject({
      groups: [0, 1, 2, 3].map((g) => ({ group: g, commit: `c${g + 1}` })),
      unplanned: [0, 1, 2, 3],
      ref: { head: 'c4' },
    });
    expect(r.cycleResultKeys).toEqual(['result-1', 'result-2', 'result-3', 'result-4']);
  });

  it('plans a group beside the next when the model is asked for that one in its own cycle', async () => {
    const { acts } = stubs([{ groupCount: 4 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    // No proposal for group 3 (its request failed, or its change overlaps an earlier group's).
    acts.proposeRemediations.mockResolvedValue({ proposed: [0, 1, 3] });
    await loop(acts);
    // Groups 1 and 2 committed together, group 3 by its own cycle, then group 4 on top of it.
    expect(acts.commitProposals.mock.calls.map(([c]) => [c.groups, c.ref.head])).toEqual([
      [[0, 1], undefined],
      [[3], 'c3'],
    ]);
    expect(acts.generateRemediation.mock.calls.map(([c]) => [c?.group, c?.proposal ?? false])).toEqual([
      [2, false],
    ]);
    // Group 2's plan runs while the model answers for group 3.
    expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit])).toEqual([[1, 'c2']]);
    expect(acts.confirmIteration.mock.calls[0]?.[0].unplanned).toEqual([0, 2, 3]);
  });

  it('commits each proposal in its own cycle in a round recorded before they were committed together', async () => {
    patches.unpatched.add(PROPOSALS_COMMITTED_TOGETHER);
    try {
      const { acts } = stubs([{ groupCount: 4 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
      acts.proposeRemediations.mockResolvedValue({ proposed: [0, 1, 3] });
      await loop(acts);
      expect(acts.commitProposals).not.toHaveBeenCalled();
      expect(acts.generateRemediation.mock.calls.map(([c]) => [c?.group, c?.proposal ?? false])).toEqual([
        [0, true],
        [1, true],
        [2, false],
        [3, true],
      ]);
      expect(acts.validateRemediation.mock.calls.map(([c]) => [c.group, c.commit])).toEqual([[1, 'c2']]);
    } finally {
      patches.unpatched.delete(PROPOSALS_COMMITTED_TOGETHER);
    }
  });

  it('asks for no proposal in an iteration of one group, nor in a round recorded before proposals', async () => {
    const one = stubs([{ groupCount: 1 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
    await loop(one.acts);
    expect(one.acts.proposeRemediations).not.toHaveBeenCalled();
    expect(one.acts.generateRemediation.mock.calls[0]?.[0]).not.toHaveProperty('proposal');
    patches.unpatched.add(PROPOSALS_AT_ONCE);
    try {
      const { acts } = stubs([{ groupCount: 3 }, { inSync: true, operationCount: 0, groupCount: 0 }]);
      await loop(acts);
      expect(acts.proposeRemediations).not.toHaveBeenCalled();
      expect(acts.validateRemediation.mock.calls.map(([c]) => c.group)).toEqual([0, 1]);
    } finally {
      patches.unpatched.delete(PROPOSALS_AT_ONCE);
    }
  });

  it('stops without progress when the whole root took every change back', async () => {
    const { acts } = stubs([{ groupCount: 2 }], true, () => ({
      planKey: undefined,
      disagreement: 'Error: Reference to undeclared resource',
      reverted: [0, 1],
      recordKey: 'confirm-1',
    }));
    const h = hooks();
    const r = await detectAndRemediate(acts, ref, [], { maxIterations: 3, groupSize: 8 }, h);
    expect(r).toMatchObject({ iterations: 1, stoppedBecause: 'no-progress', finalOperationsKey: 'ops-1' });
    expect(h.addArtifact).toHaveBeenCalledWith('confirm-1');
  });
});
