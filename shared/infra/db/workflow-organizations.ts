// The organization a Kumoss workflow belongs to, from its id (shared/ids.ts names them all): a
// session's and its rounds' from the session's row, a stack's schedule, detections and event runs
// from the stack's, a runner group's schedule, detections and repairs from the group's, a runner run
// started by the API from its execution's row. The payload codec encrypts each workflow's payloads
// with its organization's key (shared/infra/payload-codec.ts).
import type { OrganizationOf } from '../payload-codec';
import type { Db } from './index';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const SESSION = /^(?:session|generate-round|apply-round|drift-round):([^:]+)/;
const STACK = new RegExp(`^(?:drift-schedule|drift-detection|drift-events):(${UUID})`);
const GROUP = new RegExp(`^(?:runner-schedule|runner-detect|runner-repair):(${UUID})`);
const RUN = new RegExp(`^${UUID}$`);

export function workflowOrganizations(db: Db): OrganizationOf {
  return async (workflowId) => {
    const session = SESSION.exec(workflowId)?.[1];
    if (session) {
      const row = await db
        .selectFrom('sessions')
        .select('organization_uuid')
        .where('session_id', '=', session)
        .executeTakeFirst();
      return row?.organization_uuid;
    }
    const stack = STACK.exec(workflowId)?.[1];
    if (stack) {
      const row = await db
        .selectFrom('stacks')
        .select('organization_uuid')
        .where('stack_uuid', '=', stack)
        .executeTakeFirst();
      return row?.organization_uuid;
    }
    const group = GROUP.exec(workflowId)?.[1];
    if (group) {
      const row = await db
        .selectFrom('runner_groups')
        .select('organization_uuid')
        .where('runner_group_uuid', '=', group)
        .executeTakeFirst();
      return row?.organization_uuid;
    }
    if (RUN.test(workflowId)) {
      const row = await db
        .selectFrom('runner_executions')
        .select('organization_uuid')
        .where('workflow_uuid', '=', workflowId)
        .executeTakeFirst();
      return row?.organization_uuid;
    }
    return undefined;
  };
}
