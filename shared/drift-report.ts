// The drift JSON report of a round: summary, outcome, remediated resources, and — only when they
// apply — unreconciled_drift and whitelisted_exceptions. Sandbox-safe.
import { z } from 'zod';

export const OUTCOMES = ['Succeeded', 'Partial', 'Failed'] as const;
export type Outcome = (typeof OUTCOMES)[number];

export const unreconciledDriftSchema = z.object({
  address: z.string(),
  attributes: z.array(z.string()),
  reason: z.string(),
});

export const whitelistedExceptionSchema = z.object({
  address: z.string(),
  attributes: z.array(z.string()),
  rule_id: z.string(),
  reason: z.string(),
});

export const driftReportSchema = z
  .object({
    session_id: z.string(),
    round_id: z.string(),
    mode: z.enum(['partial', 'full']),
    summary: z.string(),
    outcome: z.enum(OUTCOMES),
    /** Resources the session branch changed, named only from the branch's own diff (diff_history). */
    remediated_resources: z.array(z.object({ address: z.string(), files: z.array(z.string()) })),
    unreconciled_drift: z.array(unreconciledDriftSchema).min(1).optional(),
    whitelisted_exceptions: z.array(whitelistedExceptionSchema).min(1).optional(),
    iterations: z.number().int().min(0),
    branch: z.string(),
    commit: z.string().optional(),
  })
  .strict();

export type DriftReport = z.infer<typeof driftReportSchema>;
export type UnreconciledDrift = z.infer<typeof unreconciledDriftSchema>;

/**
 * Whitelisted exceptions never lower the outcome. Unreconciled drift pulls it to Partial when the
 * round fixed something, to Failed when it fixed nothing.
 */
export function computeOutcome(remediated: number, unreconciled: number): Outcome {
  if (unreconciled === 0) return 'Succeeded';
  return remediated > 0 ? 'Partial' : 'Failed';
}

/** JSON Schema of the report, published at schemas/drift-report.schema.json. */
export function driftReportJsonSchema(): unknown {
  return z.toJSONSchema(driftReportSchema, { target: 'draft-2020-12' });
}
