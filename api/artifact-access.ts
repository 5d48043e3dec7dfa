// Who may fetch which artifact (issue 26 item 5). A saved plan (`*.tfplan`) and its JSON
// (`plan.json`, `*.tfplan.json`) hold every value of the plan verbatim, sensitive ones included:
// they are for devops and admin. Developers get what is rendered from them — the drift report
// (sensitive values replaced by shared/drift.ts), the diffs, and the engine's plan text, which
// prints a sensitive value as `(sensitive value)` as Terraform does.
import { roleAtLeast, type Role } from '../shared/infra/db/users';

/** The role a raw plan artifact needs. */
export const RAW_PLAN_ROLE: Role = 'devops';

export function isRawPlanArtifact(key: string): boolean {
  const name = key.slice(key.lastIndexOf('/') + 1);
  return name.endsWith('.tfplan') || name === 'plan.json' || name.endsWith('.tfplan.json');
}

/** Whether a caller of `role` may have a URL for `key`. */
export function mayFetchArtifact(key: string, role: Role): boolean {
  return !isRawPlanArtifact(key) || roleAtLeast(role, RAW_PLAN_ROLE);
}
