// What a round's workflow and its activities exchange: which round and root an activity works on,
// an iteration's input and output, a plan-only detection's input and output. Workflows import these
// as types; the activities (activities/drift-round.ts, drift-detection.ts, workspace.ts) implement
// them. Sandbox-safe: types only.
import type { ExceptionRule } from './drift-exceptions';

/** What every round activity gets: which round, which repository, which root. */
export interface RoundRef {
  sessionId: string;
  roundId: string;
  repositoryUrl: string;
  /** Root module inside the repository; '' or '.' for the top. */
  iacPath: string;
  scopeId: string;
  cloud: 'azure' | 'gcp' | 'aws' | 'oci' | 'kubernetes';
  /** The session branch the round commits to. */
  branch: string;
  /** Branch the session branch starts from (default: the repository's default branch). */
  baseBranch?: string;
  engine?: 'terraform' | 'tofu';
  /** The session's stored state project id (absent in rounds started before it was passed). */
  stateProjectId?: string;
  /** Exception rules in force for the round (loaded once, at its start). */
  rules?: ExceptionRule[];
  /**
   * The commit the session branch is at for this step, as the round's last step left it (absent in
   * runs recorded before it was carried). A checkout this worker holds for the round but at another
   * commit — a step of the round ran on another worker and pushed — is brought to the remote first.
   */
  head?: string;
}

export interface IterationInput {
  ref: RoundRef;
  /** `1`, `2`, … or `final` (the examination after the last iteration's cycles). */
  iteration: string;
  targets: string[];
  /** The plan the predecessor's last cycle validated; absent: plan now. */
  planKey?: string;
  /**
   * With `planKey`: that plan changes nothing (exit code 0 of `-detailed-exitcode`: every planned
   * action a no-op), so it holds no drift — drift counts only where the code still disagrees with
   * the cloud — and the iteration is in sync without reading it (no `show -json`).
   */
  planClean?: boolean;
  groupSize: number;
}

export interface IterationOutput {
  inSync: boolean;
  /** Live drift before exceptions. */
  driftCount: number;
  /** Operations left after the exception rules. */
  operationCount: number;
  whitelistedCount: number;
  groupCount: number;
  planKey: string;
  reportKey: string;
  operationsKey: string;
  whitelistedKey: string;
  planned: boolean;
  reinitialized: boolean;
}

export interface CycleInput {
  ref: RoundRef;
  iteration: string;
  group: number;
  operationsKey: string;
  groupSize: number;
  targets: string[];
  /**
   * What validating the cycle plans: `root` (absent too) the whole root — the round's targets in
   * a partial round; `group` only the group's addresses and what they depend on (-target), the
   * iteration's whole-root plan (confirmIteration) coming after.
   */
  scope?: 'root' | 'group';
  /**
   * With `scope: 'group'`: validate this commit (the cycle's) in a checkout of its own while the
   * next cycle generates on the branch. The step leaves the branch alone: a change that does not
   * plan is taken back afterwards (takeBackGroups), not reverted here.
   */
  commit?: string;
  /**
   * With `commit`: earlier groups of the iteration, committed before `commit`, planned together
   * with this one — one plan of all their addresses, stored as this group's. A plan that fails
   * takes nobody back: the workflow plans each group again at its own commit.
   */
  with?: number[];
  /**
   * Generating: the model's answer for this group was asked for with the iteration's others
   * (proposeRemediations) and is stored; the cycle commits it when the files it edits hold what it
   * expects, and asks the model itself otherwise.
   */
  proposal?: boolean;
}

/** Asks the model for every group's change of an iteration at once, before the cycles commit them. */
export interface ProposeInput {
  ref: RoundRef;
  iteration: string;
  operationsKey: string;
  groupSize: number;
}

export interface ProposeOutput {
  /** The groups with a stored proposal, ascending. */
  proposed: number[];
}

/**
 * Commits the proposed changes of consecutive groups, each as its cycle would (asking the model
 * where a proposal no longer fits), and pushes them once: one step instead of a cycle each.
 */
export interface CommitProposalsInput {
  ref: RoundRef;
  iteration: string;
  operationsKey: string;
  groupSize: number;
  targets: string[];
  /** Consecutive groups with a stored proposal, ascending. */
  groups: number[];
}

/**
 * Takes back, after an iteration's cycles, the changes whose targeted plans failed (validated
 * while later groups generated on top of them).
 */
export interface TakeBackInput {
  ref: RoundRef;
  iteration: string;
  operationsKey: string;
  groupSize: number;
  /** Every group of the iteration that committed, in order. */
  groups: { group: number; commit: string }[];
  /** Those whose targeted plan failed (their reasons are already in their cycles' results). */
  invalid: number[];
}

export interface TakeBackOutput {
  /** The branch's commit after the step. */
  head: string;
  /**
   * Groups no longer on the branch: the invalid ones, and any later one whose change did not
   * revert apart from theirs (taken back with them, the reason in its cycle's result).
   */
  takenBack: number[];
}

/**
 * The whole root's plan after an iteration whose earlier groups were each validated by a plan
 * targeted at their addresses: the plan the next iteration reads.
 */
export interface ConfirmInput {
  ref: RoundRef;
  iteration: string;
  targets: string[];
  operationsKey: string;
  groupSize: number;
  /** The iteration's groups still on the branch, in order, with their commits. */
  groups: { group: number; commit: string }[];
  /**
   * Of `groups`, those no targeted plan validated (the iteration's last, those followed by a
   * proposed change, and those left to the whole root once generation ended). When the whole root does not plan, each is first planned at
   * its own commit; those that fail are taken back in one commit and the whole root planned again
   * — the fallback that validates every group against the whole root runs only when it still fails.
   */
  unplanned?: number[];
}

export interface ConfirmOutput {
  /** The whole-root plan of the branch as the step leaves it (absent: no group survived). */
  planKey?: string;
  /** That plan changes nothing (exit code 0): IterationInput.planClean. */
  planClean?: boolean;
  reinitialized: boolean;
  /** The branch's commit after the step. */
  head: string;
  /**
   * Why the whole root did not plan with every group on it although each earlier group's targeted
   * plan did; the groups were then validated one by one against the whole root.
   */
  disagreement?: string;
  /** Groups that did not plan with the whole root: taken back, their drift left with the reason. */
  reverted: number[];
  /** What the step found, when the whole root did not plan at first (an artifact of the round). */
  recordKey?: string;
}

export interface DetectDriftInput {
  repositoryUrl: string;
  /** Branch to read; default: the repository's default branch. */
  branch?: string;
  iacPath?: string;
  scopeId: string;
  /** The managed state to read (a session's or stack's stored id); default: the legacy id of the three. */
  stateProjectId?: string;
  targets?: string[];
  /** Object-storage prefix for the plan artifacts. */
  artifactPrefix: string;
}

export interface DetectDriftOutput {
  drifted: string[];
  hasChanges: boolean;
  planKey: string;
  planJsonKey: string;
  terraformVersion?: string;
}
