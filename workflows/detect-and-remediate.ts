// The detect-and-remediate loop of a drift round (seed 000), as workflow code that only
// orchestrates: at most max_drift_reports iterations; iteration 1 plans; a later one reads the plan
// its predecessor's last cycle validated and plans for itself only when that cycle produced
// nothing; drift split into operations, exceptions dropped (the loop stops when every operation is
// excluded), survivors in groups, one generate-and-validate cycle per group.
import { setCurrentDetails } from '@temporalio/workflow';
import type { DriftRoundActivities } from '../activities/drift-round';
import type { IterationOutput, RoundRef } from '../shared/round-contracts';
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

export async function detectAndRemediate(
  acts: Pick<DriftRoundActivities, 'planIteration' | 'generateRemediation' | 'validateRemediation'>,
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
  const cycleResultKeys: string[] = [];
  let reinits = 0;
  let planKey: string | undefined;
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
    let progressed = false;
    for (let g = 0; g < det.groupCount; g++) {
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: ${det.operationCount} operation(s) in ${det.groupCount} group(s), generating group ${g + 1}`,
      );
      hooks.setStatus('generating');
      const cycle = {
        ref,
        iteration: String(i),
        group: g,
        operationsKey: det.operationsKey,
        groupSize: opts.groupSize,
        targets,
      };
      const gen = await acts.generateRemediation(cycle);
      cycleResultKeys.push(gen.resultKey);
      lastValidated = undefined;
      if (gen.commit) ref = { ...ref, head: gen.commit };
      if (!gen.changed) continue;
      hooks.setStatus('validating');
      setCurrentDetails(
        `Iteration ${i} of ${opts.maxIterations}: validating group ${g + 1} of ${det.groupCount}`,
      );
      const val = await acts.validateRemediation({ ...cycle, ref });
      if (val.reinitialized) reinits += 1;
      if (val.head) ref = { ...ref, head: val.head };
      if (val.valid && val.planKey) {
        lastValidated = val.planKey;
        progressed = true;
        hooks.addArtifact(val.planKey);
      }
    }
    planKey = lastValidated;
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
