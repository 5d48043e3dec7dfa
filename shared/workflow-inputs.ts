// What the workflows parse and say: their inputs' schemas, the round statuses, the session's
// refusals. Apart from the API's contracts (shared/contracts.ts re-exports all of it) because the
// workflow sandbox evaluates every module a workflow imports again for each workflow it creates:
// the fewer schemas a workflow's imports build, the less each workflow start costs the worker.
// Sandbox-safe.
import { z } from 'zod';

export const CLOUDS = ['azure', 'gcp', 'aws', 'oci', 'kubernetes'] as const;
export type Cloud = (typeof CLOUDS)[number];

/** The drift-exception rules (shared/drift-exceptions.ts) not expired on `today` (YYYY-MM-DD). */
export function activeRules<R extends { expires?: string | null | undefined }>(
  rules: R[],
  today: string,
): R[] {
  return rules.filter((r) => !r.expires || r.expires >= today);
}

export const ROUND_STATUSES = [
  'started',
  'filtering',
  'generating',
  'validating',
  'report',
  'apply',
  'completed',
  'uncompleted',
  'failed',
] as const;
export type RoundStatus = (typeof ROUND_STATUSES)[number];

/** Letters, digits, dot, dash, underscore: safe in branch names, keys and workflow ids. */
/**
 * How long an activity may go without a heartbeat before the server retries it elsewhere (its
 * worker died). Every activity heartbeats every 2 s while it runs (worker/heartbeat.ts), so a short
 * timeout costs nothing and a killed worker's round resumes in seconds.
 */
export const DEFAULT_HEARTBEAT_SECONDS = 10;

export const idSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'use letters, digits, dot, dash and underscore');

export const driftRoundInputSchema = z.object({
  session_id: idSchema,
  round_id: idSchema,
  mode: z.enum(['partial', 'full']),
  repository_url: z.string().url(),
  cloud: z.enum(CLOUDS),
  scope_id: z.string().min(1),
  iac_path: z.string().default(''),
  /** The session's state project id (organization, repository, path, scope); rounds read and write that state. */
  state_project_id: z.string().min(1).max(64).optional(),
  text: z.string().min(1),
  /** Session branch; default kumoss/<session_id>. */
  branch: z.string().optional(),
  base_branch: z.string().optional(),
  engine: z.enum(['terraform', 'tofu']).optional(),
  max_drift_reports: z.number().int().min(1).max(20).default(3),
  drift_group_operations: z.number().int().min(1).max(100).default(8),
  /** How long an activity may go without a heartbeat before it is retried on another worker. */
  heartbeat_timeout_seconds: z.number().int().min(5).max(3600).default(DEFAULT_HEARTBEAT_SECONDS),
  /** A partial round's targets chosen beforehand (drift inbox items): no model picks them. */
  targets: z.array(z.string().min(1).max(1024)).min(1).max(500).optional(),
});

export type DriftRoundInput = z.input<typeof driftRoundInputSchema>;

export interface DriftRoundResult {
  session_id: string;
  round_id: string;
  status: Extract<RoundStatus, 'completed' | 'uncompleted'>;
  /** Why the round ended uncompleted (declined, nothing to change). */
  reason?: string;
  outcome?: 'Succeeded' | 'Partial' | 'Failed';
  summary?: string;
  report_key?: string;
  remediated: string[];
  unreconciled_count: number;
  whitelisted_count: number;
  iterations: number;
  targets: string[];
  branch: string;
  /** Why the detect-and-remediate loop stopped. */
  stopped_because?: 'in-sync' | 'all-excluded' | 'no-progress' | 'max-iterations';
  /** Times the engine was initialised again because its output asked for it. */
  engine_reinits: number;
}

// ---------------------------------------------------------------------------------------------
// Generate rounds and apply (seed 000 by contrast with drift rounds; issue 16).

/** Where a generate or apply round works: the session's repository, root, scope and branch. */
export const sessionRoundSchema = z.object({
  session_id: idSchema,
  round_id: idSchema,
  repository_url: z.string().url(),
  cloud: z.enum(CLOUDS),
  scope_id: z.string().min(1),
  iac_path: z.string().default(''),
  /** The session's state project id (organization, repository, path, scope); rounds read and write that state. */
  state_project_id: z.string().min(1).max(64).optional(),
  branch: z.string().optional(),
  engine: z.enum(['terraform', 'tofu']).optional(),
  heartbeat_timeout_seconds: z.number().int().min(5).max(3600).default(DEFAULT_HEARTBEAT_SECONDS),
});

/** How many addresses one revert may name. */
export const MAX_REVERT_ADDRESSES = 100;

/** `POST /api/v1/sessions/{id}/revert`: drift addresses this session found. */
export const revertBodySchema = z
  .object({
    addresses: z
      .array(z.string().min(1).max(1024))
      .min(1, 'name at least one address')
      .max(MAX_REVERT_ADDRESSES),
  })
  .strict();

/** The recorded request of a revert round (`where`: e.g. " found on stack web"), bounded. */
export function revertText(addresses: string[], where = ''): string {
  const text = `Revert in the cloud the drift${where}: bring ${addresses.join(', ')} back to what the code declares.`;
  return text.length > 10_000 ? `${text.slice(0, 9_990)} …` : text;
}

export const generateRoundInputSchema = sessionRoundSchema.extend({
  text: z.string().min(1),
  base_branch: z.string().optional(),
  /** Times the model may repair a change that does not validate (the session passes the default, 2). */
  max_repair_cycles: z.number().int().min(0).max(10).default(2),
  /**
   * A revert: no model and no commit; the plan of the unchanged code targets exactly these
   * addresses, so the cloud is brought back to what the code declares.
   */
  revert: z.array(z.string().min(1)).max(MAX_REVERT_ADDRESSES).optional(),
});
export type GenerateRoundInput = z.input<typeof generateRoundInputSchema>;

/** What a plan does to one address (`read`: a data source read during apply). */
export const PLAN_ACTIONS = ['create', 'update', 'replace', 'destroy', 'read'] as const;
export const plannedChangeSchema = z.object({
  address: z.string(),
  action: z.enum(PLAN_ACTIONS),
});
export type PlannedChange = z.infer<typeof plannedChangeSchema>;

/** What a plan would do, from its `show -json`: the impact banner. */
export const planImpactSchema = z.object({
  create: z.number().int(),
  update: z.number().int(),
  replace: z.number().int(),
  destroy: z.number().int(),
  /** Addresses the plan destroys (not counting replacements). */
  destroyed: z.array(z.string()),
  /** Addresses the plan replaces (destroy and create). */
  replaced: z.array(z.string()),
  /** Every address the plan changes, with its action, in address order. */
  changes: z.array(plannedChangeSchema).default([]),
  /** The `-target` addresses the plan was made with; null: the whole root. */
  targets: z.array(z.string()).nullable().default(null),
  /**
   * The root's other pending changes (drift, or code not yet applied) that this plan leaves out:
   * never applied as its side effect.
   */
  not_in_plan: z.array(plannedChangeSchema).default([]),
});
export type PlanImpact = z.infer<typeof planImpactSchema>;

/** "not in this plan: N resources would change (…)" — the plan's leftovers, said once. */
export function notInPlanLine(impact: PlanImpact): string | undefined {
  const n = impact.not_in_plan.length;
  if (n === 0) return undefined;
  return `Not in this plan: ${n} resource${n === 1 ? '' : 's'} would change (${impact.not_in_plan
    .map((c) => `${c.address} ${c.action}`)
    .join(', ')}).`;
}

/** What OPA said of a pinned plan: deny-level findings block apply, warn-level ones are reported. */
export const complianceResultSchema = z.object({
  passed: z.boolean(),
  deny: z.array(z.string()),
  warn: z.array(z.string()),
  /** The audit report artifact. */
  report_key: z.string(),
  /** The policy directory audited (`policies/<cloud>`), or none for a cloud without policies. */
  policies: z.string().nullable(),
});
export type ComplianceResult = z.infer<typeof complianceResultSchema>;

/** The reviewed plan a generate round pinned: apply runs exactly this file. */
export const pinnedPlanSchema = z.object({
  round_id: z.string(),
  /** Object key of the saved plan file. */
  key: z.string(),
  /** SHA-256 of the plan file, checked before apply. */
  sha256: z.string(),
  /** The session branch's commit the plan was made from. */
  commit: z.string(),
  /** The state serial and lineage the plan saw (null: no state yet). */
  state_serial: z.number().int().nullable(),
  state_lineage: z.string().nullable(),
  impact: planImpactSchema,
  /** The compliance audit of this plan (absent: plans pinned before the audit). */
  compliance: complianceResultSchema.optional(),
  /** Who started the round that pinned it (user uuid; null: a run nobody started by hand). */
  pinned_by: z.string().nullable().optional(),
});
export type PinnedPlan = z.infer<typeof pinnedPlanSchema>;

/** Apply's refusal of a plan with deny-level findings and no admin override. */
export const complianceRefusal = (deny: string[]): string =>
  `The pinned plan violates ${deny.length} deny-level compliance polic${deny.length === 1 ? 'y' : 'ies'}: ${deny.join('; ')}. Run a generate round that fixes it, or an admin overrides it with a recorded reason.`;

export interface GenerateRoundResult {
  session_id: string;
  round_id: string;
  status: Extract<RoundStatus, 'completed' | 'uncompleted'>;
  reason?: string;
  summary?: string;
  report_key?: string;
  pinned_plan?: PinnedPlan;
  /** Repair cycles run after a change that did not validate. */
  repairs: number;
}

export const applyRoundInputSchema = sessionRoundSchema.extend({ pinned: pinnedPlanSchema });
export type ApplyRoundInput = z.input<typeof applyRoundInputSchema>;
export const NO_PINNED_PLAN =
  'No reviewed plan is pinned for this session; run a generate or drift round before applying.';

/** A pull request asked for on a session whose rounds changed nothing: refused before it starts. */
export const NOTHING_TO_PROPOSE =
  'The session branch has no changes yet: no round of this session completed with changes.';

/** The lock a generate round sets when it pins a plan. */
export const planLockReason = (roundId: string): string =>
  `A reviewed plan is pinned (round ${roundId}): merging waits until it is applied or an admin clears the lock.`;

/** Why a session refuses an operation: the ApplicationFailure type its update validator throws. */
export const SessionRefusals = {
  /** `Session <id> already has an operation in flight.` */
  Busy: 'SessionBusy',
  /** `Session <id> is finished and cannot be resumed.` */
  Finished: 'SessionFinished',
  /** A pull request with no change to propose, or a merge with no pull request. */
  NothingToPropose: 'NothingToPropose',
} as const;

export const sessionBusyMessage = (id: string): string => `Session ${id} already has an operation in flight.`;
export const sessionFinishedMessage = (id: string): string =>
  `Session ${id} is finished and cannot be resumed.`;
