// The detect-and-remediate loop of a drift round (seed 000), as workflow code that only
// orchestrates: at most max_drift_reports iterations; iteration 1 plans; a later one reads the plan
// its predecessor's last cycle validated (and is in sync without reading it when that plan changes
// nothing) and plans for itself only when that cycle produced nothing; drift split into
// operations, exceptions dropped (the loop stops when every operation is excluded), survivors in
// groups, one generate-and-validate cycle per group — the model asked for every group's change at
// once (proposeRemediations), the proposed changes of consecutive groups then committed in one step
// with one push (commitProposals), a group without a proposal asking in its own cycle. A group before the
// iteration's last whose next cycle asks the model itself is validated by a plan targeted at its
// addresses beside that cycle; the iteration's changes are then validated
// together by one plan of the whole root — the plan the next iteration reads (confirmIteration,
// which falls back to validating each group against the whole root when they disagree). An
// iteration with one change validates it with the whole root directly. A group's
// targeted plan runs in a checkout of its own commit while the next group generates on the branch;
// changes whose plans failed are taken back together after the iteration's cycles (takeBackGroups).
import { patched, setCurrentDetails } from '@temporalio/workflow';
import type { DriftRoundActivities, GenerateOutput } from '../activities/drift-round';
import type { CycleInput, IterationOutput, RoundRef } from '../shared/round-contracts';
import type { RoundStatus } from '../shared/contracts';

export interface LoopHooks {
  setStatus(s: RoundStatus): void;
  onIteration(i: number, detection: IterationOutput): void;
  addArtifact(key: string): void;
}

export interface LoopResult {
  iterations: number;
  /** Detection whose operations are what stays unreconciled (absent: nothing left). */
  finalOperationsKey?: string;
  whitelistedKey?: string;
  cycleResultKeys: string[];
  stoppedBecause: 'in-sync' | 'all-excluded' | 'no-progress' | 'max-iterations';
  /** Times the engine asked for init again (a remediation added a provider or module). */
  reinits: number;
  /** The branch's commit after the loop (its last cycle's commit or revert). */
  head?: string;
}

/**
 * Rounds recorded before groups were validated by targeted plans validated every group with a plan
 * of the whole root and ran no confirmIteration: they replay down that path.
 */
export const TARGETED_GROUP_PLANS = 'targeted-group-plans';

/**
 * Rounds recorded before a group's targeted plan ran beside the next group's generation validated
 * each group before generating the next, and reverted an invalid change at once: they replay so.
 */
export const PIPELINED_GROUP_PLANS = 'pipelined-group-plans';

/**
 * Rounds recorded before the groups committed while a targeted plan ran were validated together
 * (one plan of their addresses at the newest of their commits) planned each group on its own.
 */
export const BATCHED_GROUP_PLANS = 'batched-group-plans';

/**
 * Rounds recorded before the groups whose targeted plans had not begun when generation ended were
 * left to the whole root's plan (and the whole root's refusal first planned the groups no targeted
 * plan validated, each on its own) planned them after generation, before the whole root.
 */
export const LEFTOVER_GROUPS = 'leftover-groups-to-whole-root';

/**
 * Rounds recorded before an iteration asked the model for every group's change at once
 * (proposeRemediations) asked for each in its own cycle, one after another.
 */
export const PROPOSALS_AT_ONCE = 'proposals-at-once';

/**
 * Rounds recorded before the proposed changes of consecutive groups were committed in one step
 * (commitProposals, one push) committed each in its own cycle.
 */
export const PROPOSALS_COMMITTED_TOGETHER = 'proposals-committed-together';

/** The groups whose targeted plans run, numbered from 1: `group 2 (a plan of its addresses)`. */
function groupNames(groups: Set<number>, together: boolean): string {
  const n = [...groups].sort((a, b) => a - b).map((g) => g + 1);
  return n.length === 1
    ? `group ${n[0]} (a plan of its addresses)`
    : `groups ${n.join(' and ')} (${together ? 'a plan' : 'plans'} of their addresses)`;
}

export async function detectAndRemediate(
  acts: Pick<
    DriftRoundActivities,
    | 'planIteration'
    | 'proposeRemediations'
    | 'commitProposals'
    | 'generateRemediation'
    | 'validateRemediation'
    | 'confirmIteration'
    | 'takeBackGroups'
  >,
  start: RoundRef,
  targets: string[],
  opts: { maxIterations: number; groupSize: number },
  hooks: LoopHooks,
): Promise<LoopResult> {
  // Each step gets the commit the step before it left the branch at (RoundRef.head).
  let ref = start;
  const result = (r: Omit<LoopResult, 'head'>): LoopResult => ({
    ...r,
    ...(ref.head ? { head: ref.head } : {}),
  });
  const targeted = patched(TARGETED_GROUP_PLANS);
  const pipelined = targeted && patched(PIPELINED_GROUP_PLANS);
  const batched = pipelined && patched(BATCHED_GROUP_PLANS);
  const leftToRoot = batched && patched(LEFTOVER_GROUPS);
  const atOnce = leftToRoot && patched(PROPOSALS_AT_ONCE);
  const together = atOnce && patched(PROPOSALS_COMMITTED_TOGETHER);
  const cycleResultKeys: string[] = [];
  let reinits = 0;
  let planKey: string | undefined;
  /** That plan changes nothing: the next iteration is in sync without reading it. */
  let planClean = false;
  let last: IterationOutput | undefined;
  for (let i = 1; i <= opts.maxIterations; i++) {
    hooks.setStatus('generating');
    setCurrentDetails(
      `Iteration ${i} of ${opts.maxIterations}: ${planKey ? 'reading the validated plan' : 'planning'}`,
    );
    const det = await acts.planIteration({
      ref,
      iteration: String(i),
      targets,
      planKey,
      ...(planKey && planClean ? { planClean } : {}),
      groupSize: opts.groupSize,
    });
    last = det;
    if (det.reinitialized) reinits += 1;
    hooks.onIteration(i, det);
    hooks.addArtifact(det.reportKey);
    if (det.inSync) {
      return result({
        iterations: i,
        cycleResultKeys,
        whitelistedKey: det.whitelistedKey,
        stoppedBecause: 'in-sync',
        reinits,
      });
    }
    if (det.operationCount === 0) {
      // Every operation is excluded: planning again would only rediscover the same drift.
      return result({
        iterations: i,
        cycleResultKeys,
        whitelistedKey: det.whitelistedKey,
        stoppedBecause: 'all-excluded',
        reinits,
      });
    }
    let lastValidated: string | undefined;
    let lastClean = false;
    let progressed = false;
    /** This iteration's changes on the branch, awaiting the whole root's plan (targeted). */
    const pending: { group: number; commit: string }[] = [];
    const cycleFor = (g: number) => ({
      ref,
      iteration: String(i),
      group: g,
      operationsKey: det.operationsKey,
      groupSize: opts.groupSize,
      targets,
    });
    /**
     * Pipelined: the groups' targeted plans beside the generation, one after another (two at once
     * took as long on two cores: the phase is CPU-bound, and the generation slowed as much).
     */
    let validations: Promise<void> = Promise.resolve();
    let validationError: { error: unknown } | undefined;
    const validating = new Set<number>();
    /** Generation ended: a targeted plan not yet begun would only delay the whole root's. */
    let generated = false;
    /** Groups no targeted plan validated: the whole root's plan validates them (leftToRoot). */
    const unplanned: number[] = [];
    const committed: { group: number; commit: string }[] = [];
    const invalid: number[] = [];
    /** One group's targeted plan at its own commit; false when it did not plan. */
    const validateOne = async (cycle: CycleInput): Promise<boolean> => {
      const val = await acts.validateRemediation(cycle);
      if (val.reinitialized) reinits += 1;
      if (val.valid && val.planKey) hooks.addArtifact(val.planKey);
      return val.valid;
    };
    /**
     * Batched: the groups committed since the last targeted plan began are validated together —
     * one plan of their addresses at the newest of their commits (which holds them all). When it
     * does not plan, the failure is nobody's in particular: each is planned again at its own commit.
     */
    const queued: CycleInput[] = [];
    const validateQueued = async (count: number): Promise<void> => {
      const batch = queued.splice(0, count);
      const newest = batch.at(-1);
      if (validationError || !newest) return;
      if (leftToRoot && generated) {
        for (const c of batch) unplanned.push(c.group);
        return;
      }
      for (const c of batch) validating.add(c.group);
      try {
        const earlier = batch.slice(0, -1).map((c) => c.group);
        if (await validateOne(earlier.length > 0 ? { ...newest, with: earlier } : newest)) return;
        if (earlier.length === 0) invalid.push(newest.group);
        else for (const c of batch) if (!(await validateOne(c))) invalid.push(c.group);
      } catch (error) {
        validationError = { error };
      } finally {
        for (const c of batch) validating.delete(c.group);
      }
    };
    /** Groups whose change the model proposed with the others' (their cycles only commit it). */
    let proposed = new Set<number>();
    /** The cycles of proposed groups committed together (commitProposals), by group. */
    const committedTogether = new Map<number, GenerateOutput>();
    if (atOnce && det.groupCount > 1) {
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: ${det.operationCount} operation(s) in ${det.groupCount} group(s), asking the model for every group's change at once`,
      );
      const p = await acts.proposeRemediations({
        ref,
        iteration: String(i),
        operationsKey: det.operationsKey,
        groupSize: opts.groupSize,
      });
      proposed = new Set(p.proposed);
    }
    for (let g = 0; g < det.groupCount; g++) {
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: ${det.operationCount} operation(s) in ${det.groupCount} group(s), generating group ${g + 1}${validating.size === 0 ? '' : ` while validating ${groupNames(validating, batched)}`}`,
      );
      hooks.setStatus('generating');
      if (together && proposed.has(g) && !committedTogether.has(g)) {
        // This group's and the next proposed ones' changes, committed in one step.
        const run: number[] = [];
        for (let h = g; proposed.has(h); h++) run.push(h);
        setCurrentDetails(
          `Iteration ${i} of ${opts.maxIterations}: ${det.operationCount} operation(s) in ${det.groupCount} group(s), committing the proposed changes of ${run.length === 1 ? `group ${g + 1}` : `groups ${g + 1}–${g + run.length}`}${validating.size === 0 ? '' : ` while validating ${groupNames(validating, batched)}`}`,
        );
        const { group: _first, ...at } = cycleFor(g);
        const outs = await acts.commitProposals({ ...at, groups: run });
        outs.forEach((o, k) => committedTogether.set(g + k, o));
      }
      const gen =
        committedTogether.get(g) ??
        (await acts.generateRemediation({
          ...cycleFor(g),
          ...(proposed.has(g) ? { proposal: true } : {}),
        }));
      cycleResultKeys.push(gen.resultKey);
      lastValidated = undefined;
      lastClean = false;
      if (gen.commit) ref = { ...ref, head: gen.commit };
      if (!gen.changed) continue;
      if (pipelined && gen.commit) {
        committed.push({ group: g, commit: gen.commit });
        // The next cycle only commits a proposal: a targeted plan would have no generation to
        // hide behind, and would delay the whole root's.
        if (g === det.groupCount - 1 || proposed.has(g + 1)) {
          unplanned.push(g);
          continue; // validated with the whole root's plan, below
        }
        const cycle = { ...cycleFor(g), scope: 'group' as const, commit: gen.commit };
        // Unbatched (rounds recorded before batching), each group's plan on its own: the same steps.
        queued.push(cycle);
        validations = validations.then(() => validateQueued(batched ? queued.length : 1));
        continue;
      }
      // The iteration's last group is validated with the whole root's plan, below.
      if (targeted && gen.commit && g === det.groupCount - 1) {
        pending.push({ group: g, commit: gen.commit });
        continue;
      }
      hooks.setStatus('validating');
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: validating group ${g + 1} of ${det.groupCount}${targeted ? ' (a plan of its addresses)' : ''}`,
      );
      const val = await acts.validateRemediation({
        ...cycleFor(g),
        ...(targeted ? { scope: 'group' as const } : {}),
      });
      if (val.reinitialized) reinits += 1;
      if (val.head) ref = { ...ref, head: val.head };
      if (val.valid && val.planKey) {
        hooks.addArtifact(val.planKey);
        if (targeted && gen.commit) pending.push({ group: g, commit: gen.commit });
        else {
          lastValidated = val.planKey;
          lastClean = val.planClean === true;
          progressed = true;
        }
      }
    }
    if (pipelined) {
      generated = true;
      if (validating.size > 0) {
        hooks.setStatus('validating');
        setCurrentDetails(
          `Iteration ${i} of ${opts.maxIterations}: validating ${groupNames(validating, batched)}`,
        );
      }
      await validations;
      if (validationError) throw validationError.error;
      let takenBack: number[] = [];
      if (invalid.length > 0) {
        hooks.setStatus('validating');
        setCurrentDetails(
          `Iteration ${i} of ${opts.maxIterations}: taking back ${invalid.length} change(s) that did not validate`,
        );
        const back = await acts.takeBackGroups({
          ref,
          iteration: String(i),
          operationsKey: det.operationsKey,
          groupSize: opts.groupSize,
          groups: committed,
          invalid: [...invalid].sort((a, b) => a - b),
        });
        ref = { ...ref, head: back.head };
        takenBack = back.takenBack;
      }
      pending.push(...committed.filter((c) => !takenBack.includes(c.group)));
    }
    const only = pending.length === 1 ? pending[0] : undefined;
    if (only) {
      // One change: the whole root's plan validates it (and takes it back when it does not plan).
      hooks.setStatus('validating');
      setCurrentDetails(`Iteration ${i} of ${opts.maxIterations}: validating with a plan of the whole root`);
      const val = await acts.validateRemediation(cycleFor(only.group));
      if (val.reinitialized) reinits += 1;
      if (val.head) ref = { ...ref, head: val.head };
      if (val.valid && val.planKey) {
        hooks.addArtifact(val.planKey);
        lastValidated = val.planKey;
        lastClean = val.planClean === true;
        progressed = true;
      }
    } else if (pending.length > 1) {
      hooks.setStatus('validating');
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: validating ${pending.length} groups' changes with a plan of the whole root`,
      );
      const conf = await acts.confirmIteration({
        ref,
        iteration: String(i),
        targets,
        operationsKey: det.operationsKey,
        groupSize: opts.groupSize,
        groups: pending,
        ...(leftToRoot
          ? { unplanned: pending.filter((p) => unplanned.includes(p.group)).map((p) => p.group) }
          : {}),
      });
      if (conf.reinitialized) reinits += 1;
      ref = { ...ref, head: conf.head };
      if (conf.recordKey) hooks.addArtifact(conf.recordKey);
      if (conf.disagreement) {
        setCurrentDetails(
          `Iteration ${i} of ${opts.maxIterations}: the whole root did not plan with every group's change although each group's own plan did (${conf.disagreement}); each group was validated against the whole root, ${conf.reverted.length} taken back`,
        );
      }
      if (conf.planKey) {
        hooks.addArtifact(conf.planKey);
        lastValidated = conf.planKey;
        lastClean = conf.planClean === true;
        progressed = true;
      }
    }
    planKey = lastValidated;
    planClean = lastClean;
    if (!progressed) {
      return result({
        iterations: i,
        cycleResultKeys,
        finalOperationsKey: det.operationsKey,
        whitelistedKey: det.whitelistedKey,
        stoppedBecause: 'no-progress',
        reinits,
      });
    }
  }
  // The last iteration's cycles changed the code: examine where that leaves the drift.
  hooks.setStatus('validating');
  setCurrentDetails('Examining the drift left after the last iteration');
  const final = await acts.planIteration({
    ref,
    iteration: 'final',
    targets,
    planKey,
    ...(planKey && planClean ? { planClean } : {}),
    groupSize: opts.groupSize,
  });
  hooks.addArtifact(final.reportKey);
  return result({
    iterations: opts.maxIterations,
    cycleResultKeys,
    ...(final.operationCount > 0 ? { finalOperationsKey: final.operationsKey } : {}),
    whitelistedKey: final.whitelistedKey ?? last?.whitelistedKey,
    stoppedBecause: final.inSync ? 'in-sync' : 'max-iterations',
    reinits: reinits + (final.reinitialized ? 1 : 0),
  });
}
