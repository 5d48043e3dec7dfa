// The organization a Kumoss workflow belongs to, from its id (shared/ids.ts names them all): a
// session's and its rounds' from the session's row, a stack's schedule, detections and event runs
// from the stack's, a runner group's schedule, detections and repairs from the group's, a runner run
// started by the API from its execution's row. The payload codec encrypts each workflow's payloads
// with its organization's key (shared/infra/payload-codec.ts).
import type { OrganizationOf } from '../payload-codec';
import { sessionOrganization } from './sessions';
import type { Db } from './index';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const SESSION = /^(?:session|generate-round|apply-round|drift-round):([^:]+)/;

/** Ids owned by a row: the id's pattern, the table and the column the captured key is in. */
const OWNERS = [
  {
    id: new RegExp(`^(?:drift-schedule|drift-detection|drift-events):(${UUID})`),
    table: 'stacks',
    key: 'stack_uuid',
  },
  {
    id: new RegExp(`^(?:runner-schedule|runner-detect|runner-repair):(${UUID})`),
    table: 'runner_groups',
    key: 'runner_group_uuid',
  },
  { id: new RegExp(`^(${UUID})$`), table: 'runner_executions', key: 'workflow_uuid' },
] as const;

export function workflowOrganizations(db: Db): OrganizationOf {
  return async (workflowId) => {
    const session = SESSION.exec(workflowId)?.[1];
    if (session) return sessionOrganization(db, session);
    for (const owner of OWNERS) {
      const key = owner.id.exec(workflowId)?.[1];
      if (!key) continue;
      const row = await db
        .selectFrom(owner.table)
        .select('organization_uuid')
        .where(owner.key, '=', key)
        .executeTakeFirst();
      return row?.organization_uuid;
    }
    return undefined;
  };
}
