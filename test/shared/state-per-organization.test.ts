// State per organization in the metadata store: two organizations that register the same
// repository, path and scope get a state project id each — for their sessions and their stacks —,
// a stack registered before the organization was hashed in keeps the legacy id, and the session a
// stack opens works on the stack's own state.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { insertSession, legacyStateProjectId, stateProjectId } from '../../shared/infra/db/sessions';
import { claimRemediation, createStack, getStack } from '../../shared/infra/db/stacks';
import { createUser } from '../../shared/infra/db/users';
import { stack } from '../support/stack';

describe('state per organization', () => {
  let db: Db;
  const url = `https://127.0.0.1:1/shared-${Date.now()}.git`;
  const defaults = { max_drift_reports: 3, drift_group_operations: 8 };
  beforeAll(async () => {
    db = createDb(stack().databaseUrl);
    await migrate(db);
  });
  afterAll(async () => {
    await db.destroy();
  });

  const member = async (org: string) => {
    const { user } = await createUser(db, {
      name: `devops-${randomUUID()}`,
      role: 'devops',
      organization: org,
    });
    return user;
  };

  it("gives two organizations' sessions on one repository, path and scope separate states", async () => {
    const [a, b] = await Promise.all([member(`state-a-${Date.now()}`), member(`state-b-${Date.now()}`)]);
    const open = (u: typeof a) =>
      insertSession(
        db,
        {
          session_id: randomUUID(),
          organization_uuid: u.organization_uuid,
          created_by: u.user_uuid,
          repository_url: url,
          cloud: 'aws',
          scope_id: 'scope-shared',
          iac_path: 'envs/prod',
        },
        defaults,
      );
    const [sa, sb] = await Promise.all([open(a), open(b)]);
    expect(sa.state_project_id).not.toBe(sb.state_project_id);
    expect(sa.state_project_id).toBe(stateProjectId(a.organization_uuid, url, 'envs/prod/', 'scope-shared'));
    expect(sa.state_project_id).not.toBe(legacyStateProjectId(url, 'envs/prod', 'scope-shared'));
  });

  it("gives stacks their organization's state; an older stack keeps the legacy one, and so do the sessions it opens", async () => {
    const [a, b] = await Promise.all([member(`stack-a-${Date.now()}`), member(`stack-b-${Date.now()}`)]);
    const spec = (name: string) => ({
      name,
      repository_url: url,
      cloud: 'aws' as const,
      scope_id: 'scope-shared',
      iac_path: '',
      schedule: { interval_minutes: 60 },
    });
    const sa = await createStack(db, a.organization_uuid, spec('root-a'), a.user_uuid);
    const sb = await createStack(db, b.organization_uuid, spec('root-b'), b.user_uuid);
    expect(sa.state_project_id).toBe(stateProjectId(a.organization_uuid, url, '', 'scope-shared'));
    expect(sb.state_project_id).not.toBe(sa.state_project_id);

    // A stack registered before migration 0016 has no stored id: it reads the legacy state.
    await db
      .updateTable('stacks')
      .set({ state_project_id: null })
      .where('stack_uuid', '=', sa.stack_uuid)
      .execute();
    const legacy = legacyStateProjectId(url, '', 'scope-shared');
    expect((await getStack(db, sa.stack_uuid)).state_project_id).toBe(legacy);
    const claim = await claimRemediation(db, {
      stack_uuid: sa.stack_uuid,
      run_id: `run-${randomUUID()}`,
      session_id: randomUUID(),
      items: [],
      defaults,
    });
    if (!claim.opened) throw new Error(claim.reason);
    expect(claim.settings.state_project_id).toBe(legacy);
  });
});
