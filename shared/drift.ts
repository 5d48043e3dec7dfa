// Drift as the engine reports it: `show -json` of a saved plan. Pure functions, sandbox-safe.
import { z } from 'zod';

const changeSchema = z.object({
  actions: z.array(z.string()),
  before: z.unknown().optional(),
  after: z.unknown().optional(),
});

const resourceChangeSchema = z.object({
  address: z.string(),
  module_address: z.string().optional(),
  mode: z.string().optional(),
  type: z.string(),
  name: z.string(),
  provider_name: z.string().optional(),
  change: changeSchema,
});

/** The parts of the plan JSON representation Kumoss reads; everything else passes through. */
export const planJsonSchema = z.looseObject({
  format_version: z.string(),
  terraform_version: z.string().optional(),
  resource_drift: z.array(resourceChangeSchema).optional(),
  resource_changes: z.array(resourceChangeSchema).optional(),
});

export type PlanJson = z.infer<typeof planJsonSchema>;
export type ResourceChange = z.infer<typeof resourceChangeSchema>;

export function parsePlanJson(raw: unknown): PlanJson {
  return planJsonSchema.parse(raw);
}

const isNoop = (actions: string[]): boolean =>
  actions.length === 0 || actions.every((a) => a === 'no-op' || a === 'read');

/**
 * Addresses of managed resources changed outside the engine (`resource_drift` with a real
 * action), sorted. A resource deleted out of band shows as drift `delete`; one edited, `update`.
 */
export function driftedAddresses(plan: PlanJson): string[] {
  const addresses = new Set<string>();
  for (const rc of plan.resource_drift ?? []) {
    if (rc.mode === 'data') continue;
    if (!isNoop(rc.change.actions)) addresses.add(rc.address);
  }
  return [...addresses].sort();
}
