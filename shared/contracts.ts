// zod contracts shared by the API, the workflows and the OpenAPI document. Sandbox-safe.
import { z } from 'zod';
import { CLOUDS } from './drift-exceptions';

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
  text: z.string().min(1),
  /** Session branch; default kumoss/<session_id>. */
  branch: z.string().optional(),
  base_branch: z.string().optional(),
  engine: z.enum(['terraform', 'tofu']).optional(),
  max_drift_reports: z.number().int().min(1).max(20).default(3),
  drift_group_operations: z.number().int().min(1).max(100).default(8),
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

export interface RoundProgress {
  status: RoundStatus;
  iteration: number;
  max_iterations: number;
  operations: number;
  groups: number;
  artifacts: string[];
}
