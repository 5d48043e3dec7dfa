// Stacks: registered Terraform roots of an organization, checked for drift on their own Temporal
// Schedule (`drift-schedule:<stack>`), and the drift inbox their detection runs keep — one item
// per (stack, resource address, attribute path), opened, updated and resolved by the runs.
import { z } from 'zod';
import { iacPathSchema, MAX_REVERT_ADDRESSES, repositoryUrlSchema, revertText } from './contracts';
import { CLOUDS } from './drift-exceptions';
import { auditSummarySchema, type AuditSummary } from './audit-events';

/** How often a stack is checked: an interval (1 minute at the least) or a cron expression in a time zone. */
export const stackScheduleSchema = z
  .object({
    interval_minutes: z
      .number()
      .int()
      .min(1, 'must be at least 1')
      .max(7 * 24 * 60)
      .optional(),
    cron: z
      .string()
      .trim()
      .max(128)
      .regex(/^(\S+\s+){4}\S+$/, 'must be a cron expression of five fields')
      .optional(),
    time_zone: z.string().trim().min(1).max(64).optional(),
    /** Each run starts up to this much later than its time (spreads many stacks' runs). */
    jitter_seconds: z.number().int().min(0).max(3600).optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if ((s.interval_minutes === undefined) === (s.cron === undefined))
      ctx.addIssue({ code: 'custom', message: 'needs exactly one of interval_minutes or cron' });
    if (s.time_zone !== undefined && s.cron === undefined)
      ctx.addIssue({ code: 'custom', path: ['time_zone'], message: 'applies to cron only' });
    if (s.time_zone !== undefined) {
      try {
        new Intl.DateTimeFormat('en', { timeZone: s.time_zone });
      } catch {
        ctx.addIssue({ code: 'custom', path: ['time_zone'], message: 'is not a known time zone' });
      }
    }
  });
export type StackSchedule = z.infer<typeof stackScheduleSchema>;

export const AUTO_REMEDIATE = ['off', 'open_session'] as const;

const nameSchema = z
  .string()
  .trim()
  .min(1, 'is required')
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'may hold letters, digits, ".", "_" and "-"');

const branchSchema = z
  .string()
  .trim()
  .max(255)
  .regex(/^(?!.*\.\.)(?!\/)[A-Za-z0-9._/-]*$/, 'must be a branch name');

/** A new stack: the fields of a session's first request, plus its engine, branch and schedule. */
export const stackSpecSchema = z
  .object({
    name: nameSchema,
    repository_url: repositoryUrlSchema,
    cloud: z.enum(CLOUDS),
    scope_id: z.string().trim().min(1, 'is required').max(256),
    iac_path: iacPathSchema.optional(),
    engine: z.enum(['terraform', 'tofu']).optional(),
    /** Default: the repository's default branch. */
    branch: branchSchema.optional(),
    schedule: stackScheduleSchema,
    auto_remediate: z.enum(AUTO_REMEDIATE).optional(),
  })
  .strict();
export type StackSpec = z.infer<typeof stackSpecSchema>;

/** A change to a stack: any of its fields but its name. */
export const stackUpdateSchema = stackSpecSchema.omit({ name: true }).partial().strict();
export type StackUpdate = z.infer<typeof stackUpdateSchema>;

export const scheduleNoteSchema = z.object({ note: z.string().trim().max(500).optional() }).strict();

export const backfillSchema = z
  .object({ start: z.string().datetime({ offset: true }), end: z.string().datetime({ offset: true }) })
  .strict()
  .refine((b) => Date.parse(b.start) < Date.parse(b.end), { message: 'start must be before end' })
  .refine((b) => Date.parse(b.end) - Date.parse(b.start) <= 7 * 24 * 3600 * 1000, {
    message: 'a backfill covers at most 7 days',
  });

/** Open a partial drift session on chosen items of one stack (its targets: their addresses). */
export const remediateItemsSchema = z
  .object({ item_uuids: z.array(z.string().uuid()).min(1, 'name at least one item').max(100) })
  .strict();

/** The request of a session opened on drift items: what a person would have typed, bounded. */
export function remediationRequest(
  stackName: string,
  items: { address: string; attribute: string }[],
): {
  text: string;
  targets: string[];
} {
  const targets = [...new Set(items.map((i) => i.address))].slice(0, 500);
  const listed = items.map((i) => (i.attribute === '*' ? i.address : `${i.address} (${i.attribute})`));
  let text = `Remediate the drift found on stack ${stackName}: bring the code in line with the cloud for ${listed.join(', ')}.`;
  if (text.length > 10_000) text = `${text.slice(0, 9_990)} …`;
  return { text, targets };
}

/** The request of a revert session opened on drift items: the addresses, bounded. */
export function revertRequest(
  stackName: string,
  items: { address: string }[],
): { text: string; addresses: string[] } {
  const addresses = [...new Set(items.map((i) => i.address))].slice(0, MAX_REVERT_ADDRESSES);
  return {
    text: revertText(addresses, ` found on stack ${stackName}`),
    addresses,
  };
}

export const stackSchema = z.object({
  stack_uuid: z.string(),
  organization_uuid: z.string(),
  name: z.string(),
  repository_url: z.string(),
  iac_path: z.string(),
  cloud: z.enum(CLOUDS),
  scope_id: z.string(),
  engine: z.enum(['terraform', 'tofu']),
  branch: z.string(),
  schedule: stackScheduleSchema,
  auto_remediate: z.enum(AUTO_REMEDIATE),
  /** Who registered it: a session its auto-remediation opens is theirs. */
  created_by: z.string().nullable(),
  /** The session its auto-remediation opened last (another opens once this one is no longer ACTIVE). */
  remediation_session_id: z.string().nullable(),
  /** The managed state its detections read, and the state of the sessions it opens. */
  state_project_id: z.string(),
});
export type Stack = z.infer<typeof stackSchema>;

/** The Temporal Schedule of a stack, and the workflow id of its runs. */
export { stackScheduleId } from './ids';
export const stackDetectionWorkflowType = 'stackDetection';
export const stackEventsWorkflowType = 'stackEvents';

export const DRIFT_ITEM_STATES = ['open', 'resolved'] as const;
/** The clouds the inbox filters by. */
export const CLOUD_FILTER = CLOUDS;
export type DriftItemState = (typeof DRIFT_ITEM_STATES)[number];

/** One drifted attribute a detection run saw, as the inbox keys it. */
export interface DetectedDrift {
  address: string;
  /** Dotted attribute path; `*` for the whole resource (created, deleted, replaced). */
  attribute: string;
  action: string;
  /** The exception rule that whitelists it, if any: such an item never alerts. */
  rule_id?: string;
  /** What the code declares and what the cloud has (sensitive values already redacted). */
  declared?: unknown;
  actual?: unknown;
  note?: string;
}

/** The most of one value an inbox item keeps: a longer one is kept as the start of its JSON. */
export const ITEM_VALUE_MAX_CHARS = 2_000;

/** A value as an inbox item keeps it: itself, or the start of its JSON text when it is long. */
export function itemValue(v: unknown): unknown {
  if (v === undefined) return null;
  const text = JSON.stringify(v);
  return text.length <= ITEM_VALUE_MAX_CHARS
    ? v
    : `${text.slice(0, ITEM_VALUE_MAX_CHARS)}… (${text.length} characters)`;
}

export interface StackDetectionInput {
  stack_uuid: string;
  /** An event-driven run: plan only these addresses (`-target`); only their items can resolve. */
  targets?: string[];
  /** The audit events behind an event-driven run, newest first: the first is on the items it opens. */
  audit?: AuditSummary[];
}

export interface StackDetectionResult {
  run_id: string;
  status: 'completed' | 'failed' | 'skipped';
  drift_count: number;
  opened: number;
  resolved: number;
  whitelisted: number;
  reason?: string;
  /** The partial drift session auto-remediation opened for the new items. */
  session_id?: string;
}

/** A detection run as recorded (GET /api/v1/stacks/{id}/runs). */
export const detectionRunSchema = z.object({
  run_id: z.string(),
  stack_uuid: z.string(),
  status: z.enum(['running', 'completed', 'failed']),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  drift_count: z.number().int(),
  opened: z.number().int(),
  resolved: z.number().int(),
  whitelisted: z.number().int(),
  plan_key: z.string().nullable(),
  report_key: z.string().nullable(),
  error: z.string().nullable(),
  /** The session its auto-remediation opened. */
  session_id: z.string().nullable(),
});
export type DetectionRun = z.infer<typeof detectionRunSchema>;

/** An item of the drift inbox (GET /api/v1/drift-items). */
export const driftItemSchema = z.object({
  drift_item_uuid: z.string(),
  stack_uuid: z.string(),
  stack_name: z.string(),
  cloud: z.string(),
  address: z.string(),
  attribute: z.string(),
  action: z.string(),
  state: z.enum(DRIFT_ITEM_STATES),
  whitelisted: z.boolean(),
  rule_id: z.string().nullable(),
  first_seen_at: z.string(),
  last_seen_at: z.string(),
  resolved_at: z.string().nullable(),
  runs_seen: z.number().int(),
  /** The remediation session opened for it, if any. */
  session_id: z.string().nullable(),
  /** What the code declares and what the cloud has (sensitive values redacted; null: not set). */
  declared: z.unknown(),
  actual: z.unknown(),
  /** Where a drift found only in a provider's mirror attribute (`tags_all`) comes from. */
  note: z.string().nullable(),
  /** The audit event (who, when, how, from where) behind the run that saw it last; null: none seen. */
  audit: auditSummarySchema.nullable(),
});
export type DriftItem = z.infer<typeof driftItemSchema>;

/** A Temporal Schedule's state as the API shows it. */
export const scheduleStateSchema = z.object({
  schedule_id: z.string(),
  paused: z.boolean(),
  note: z.string().nullable(),
  next_runs: z.array(z.string()),
  recent_runs: z.array(z.object({ scheduled_at: z.string(), workflow_id: z.string() })),
});
export type ScheduleState = z.infer<typeof scheduleStateSchema>;

/** A stack as the API answers it: the registered fields and its schedule's state. */
export const stackAnswerSchema = stackSchema.extend({ schedule_state: scheduleStateSchema.nullable() });

/** A run now's answer: the stack, and the run the schedule started (its workflow id, the run's id). */
export const stackTriggerAnswerSchema = stackAnswerSchema.extend({
  run_id: z.string().describe('The started run: its workflow id, as the runs list names it'),
});

export const stackListSchema = z.object({ stacks: z.array(stackAnswerSchema) });
export const detectionRunListSchema = z.object({ runs: z.array(detectionRunSchema) });

/** `GET /api/v1/drift-items`'s filters. */
export const driftItemQuerySchema = z
  .object({
    stack: z.uuid().optional(),
    state: z.enum(DRIFT_ITEM_STATES).optional(),
    cloud: z.enum(CLOUD_FILTER).optional(),
  })
  .strict();
export const driftItemListSchema = z.object({ items: z.array(driftItemSchema) });
