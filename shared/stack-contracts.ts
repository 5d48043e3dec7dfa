// Stacks: registered Terraform roots of an organization, checked for drift on their own Temporal
// Schedule (`drift-schedule:<stack>`), and the drift inbox their detection runs keep — one item
// per (stack, resource address, attribute path), opened, updated and resolved by the runs.
import { z } from 'zod';
import { iacPathSchema, repositoryUrlSchema } from './contracts';
import { CLOUDS } from './drift-exceptions';

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

export interface Stack {
  stack_uuid: string;
  organization_uuid: string;
  name: string;
  repository_url: string;
  iac_path: string;
  cloud: (typeof CLOUDS)[number];
  scope_id: string;
  engine: 'terraform' | 'tofu';
  branch: string;
  schedule: StackSchedule;
  auto_remediate: (typeof AUTO_REMEDIATE)[number];
}

/** The Temporal Schedule of a stack, and the workflow id of its runs. */
export const stackScheduleId = (stackUuid: string) => `drift-schedule:${stackUuid}`;
export const stackDetectionWorkflowType = 'stackDetection';

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
}

export interface StackDetectionInput {
  stack_uuid: string;
}

export interface StackDetectionResult {
  run_id: string;
  status: 'completed' | 'failed' | 'skipped';
  drift_count: number;
  opened: number;
  resolved: number;
  whitelisted: number;
  reason?: string;
}
