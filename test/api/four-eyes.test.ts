// Four eyes (orchestration.apply_requires_approval): a pinned plan is applied only after a second
// devops or admin approved that very plan — not the person who pinned it, and not an earlier plan.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { createUserInOrganization, findUserByToken, type Role } from '../../shared/infra/db/users';
import { notifySessionChanged } from '../../shared/infra/db/sessions';
import { insertSessionRow, roleTokens, startTestApi, type TestApi } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';
import { testPinnedPlan } from '../support/pinned-plan';

describe('apply with orchestration.apply_requires_approval', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let tokens: Record<Role, string>;
  let secondDevops: string;

  beforeAll(async () => {
    h = await temporalHarness('four-eyes');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'four-eyes');
    const first = await findUserByToken(db, tokens.devops);
    const created = await secondDevopsToken(first?.organization_uuid ?? '');
    secondDevops = created;
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      orchestration: { apply_requires_approval: true },
    });
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  /** A second devops user in the same organization. */
  async function secondDevopsToken(organization_uuid: string): Promise<string> {
    return (
      await createUserInOrganization(db, {
        name: `devops-two-${Date.now()}`,
        role: 'devops',
        organization_uuid,
      })
    ).token;
  }

  /** A session (`creator`'s) whose generate round, started by the first devops user, pinned a plan. */
  async function pinned(sha256: string, creator = tokens.devops): Promise<string> {
    const sessionId = `s-eyes-${randomUUID().slice(0, 8)}`;
    const plan = testPinnedPlan(sessionId, sha256);
    const devops = await findUserByToken(db, tokens.devops);
    await insertSessionRow(db, creator, {
      session_id: sessionId,
      pinned_plan: JSON.stringify({ ...plan, pinned_by: devops?.user_uuid }) as never,
    });
    await db
      .insertInto('session_locks')
      .values({
        session_id: sessionId,
        reason: 'plan pinned',
        kind: 'plan',
        locked_by: devops?.user_uuid,
      } as never)
      .execute();
    return sessionId;
  }

  it('refuses apply until a second person approves the pinned plan; the one who pinned it cannot', async () => {
    const sessionId = await pinned('a'.repeat(64));
    const apply = (token: string) => api.call('POST', `/api/v1/sessions/${sessionId}/apply`, token);
    const approve = (token: string) => api.call('POST', `/api/v1/sessions/${sessionId}/approve`, token);

    const refused = await apply(tokens.devops);
    expect(refused.status).toBe(409);
    expect((refused.body.error as { code: string }).code).toBe('approval_required');
    // The author of the plan cannot be its second pair of eyes; a developer cannot approve.
    const own = await approve(tokens.devops);
    expect(own.status).toBe(403);
    expect((own.body.error as { code: string }).code).toBe('own_plan');
    expect((await approve(tokens.developer)).status).toBe(403);
    expect(
      (await api.call('GET', `/api/v1/sessions/${sessionId}`, tokens.developer)).body.plan_approval,
    ).toBe(null);

    const ok = await approve(secondDevops);
    expect(ok.status).toBe(200);
    expect(ok.body.plan_approval).toMatchObject({ sha256: 'a'.repeat(64) });
    expect(
      (await api.call('GET', `/api/v1/sessions/${sessionId}`, tokens.developer)).body.plan_approval,
    ).toMatchObject({ sha256: 'a'.repeat(64), name: expect.stringMatching(/^devops-two-/) as unknown });

    // A new plan pinned since: the approval was for the other one.
    await db
      .updateTable('sessions')
      .set({
        pinned_plan: JSON.stringify({
          ...(
            await db
              .selectFrom('sessions')
              .select('pinned_plan')
              .where('session_id', '=', sessionId)
              .executeTakeFirstOrThrow()
          ).pinned_plan,
          sha256: 'b'.repeat(64),
        }),
      } as never)
      .where('session_id', '=', sessionId)
      .execute();
    // As the session workflow's record does when it pins a plan: the store says the session changed.
    await notifySessionChanged(db, sessionId);
    expect((await apply(tokens.admin)).status).toBe(409);
    // The detail is served from the API's cache, which the store's NOTIFY clears when it arrives:
    // the read that follows the change may come first.
    await expect
      .poll(
        async () => (await api.call('GET', `/api/v1/sessions/${sessionId}`, tokens.admin)).body.plan_approval,
      )
      .toBe(null);
    expect((await approve(tokens.admin)).status).toBe(200);
    const accepted = await apply(tokens.devops);
    expect(accepted.status).toBe(202);
  });

  it('an admin lock does not let the pinner approve their own plan', async () => {
    // The session is the admin's; its generate round was the devops user's.
    const sessionId = await pinned('c'.repeat(64), tokens.admin);
    const admin = await findUserByToken(db, tokens.admin);
    // An admin's lock replaces the plan's: the plan still names who pinned it.
    await db
      .updateTable('session_locks')
      .set({ kind: 'admin', reason: 'change freeze', locked_by: admin?.user_uuid } as never)
      .where('session_id', '=', sessionId)
      .execute();
    const own = await api.call('POST', `/api/v1/sessions/${sessionId}/approve`, tokens.devops);
    expect(own.status).toBe(403);
    expect((own.body.error as { code: string }).code).toBe('own_plan');
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/approve`, secondDevops)).status).toBe(200);
  });

  it('leaves the seed contract alone: apply without a pinned plan is accepted (the round then fails with its message)', async () => {
    const { sessionId } = await insertSessionRow(db, tokens.devops);
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/approve`, tokens.admin)).status).toBe(409);
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/apply`, tokens.devops)).status).toBe(202);
  });
});
