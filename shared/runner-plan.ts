// Pure logic of the runner drift plan: compare what a resource should be with what it is, and
// turn the seven detector results into a RunnerEnvironmentDriftPlan. Sandbox-safe.
import type {
  BlockedResource,
  DetectorResult,
  DriftSummary,
  FieldDifference,
  PlannedAction,
  PlanStatus,
} from './runner-contracts';

/** The fields whose actual value differs from the expected one (expected undefined: not checked). */
export function differences(
  expected: Record<string, unknown>,
  actual: Record<string, unknown>,
): FieldDifference[] {
  const out: FieldDifference[] = [];
  for (const [field, want] of Object.entries(expected)) {
    if (want === undefined) continue;
    const have = actual[field];
    if (JSON.stringify(want) !== JSON.stringify(have))
      out.push({ field, expected: want, actual: have ?? null });
  }
  return out;
}

export interface DriftPlan {
  plan_status: PlanStatus;
  actions_needed: PlannedAction[];
  blocked_resources: BlockedResource[];
  drift_summary: DriftSummary;
}

/** `results` maps a detect step's name to its result. */
export function buildPlan(results: Record<string, DetectorResult>): DriftPlan {
  const actions_needed: PlannedAction[] = [];
  const blocked_resources: BlockedResource[] = [];
  const summary: DriftSummary = { checked: 0, skipped: 0, in_sync: 0, drifted: 0, blocked: 0, resources: {} };
  for (const [step, r] of Object.entries(results)) {
    summary.resources[r.resource] = r.status;
    if (r.status === 'skipped') {
      summary.skipped++;
      continue;
    }
    summary.checked++;
    if (r.status === 'in_sync') summary.in_sync++;
    else if (r.status === 'blocked' || !r.action) {
      summary.blocked++;
      blocked_resources.push({
        resource: r.resource,
        step,
        target: r.target ?? '',
        reason: r.reason ?? 'Kumoss cannot repair this resource by itself.',
      });
    } else {
      summary.drifted++;
      actions_needed.push({
        resource: r.resource,
        step,
        action: r.action,
        target: r.target ?? '',
        differences: r.differences ?? [],
      });
    }
  }
  const plan_status: PlanStatus = actions_needed.length
    ? 'drifted'
    : blocked_resources.length
      ? 'blocked'
      : 'clean';
  return { plan_status, actions_needed, blocked_resources, drift_summary: summary };
}

/** The detect run's outcome: clean, drift_found, repair_started or blocked. */
export function detectOutcome(plan: { plan_status: PlanStatus }, repairStarted: boolean): string {
  if (plan.plan_status === 'clean') return 'clean';
  if (repairStarted) return 'repair_started';
  return plan.plan_status === 'blocked' ? 'blocked' : 'drift_found';
}
