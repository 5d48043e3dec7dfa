// Pull requests on the local git host: created from the session branch with a generated title and
// description, merged for real (and pushed), refused while the session is locked; the drift
// session ends at the merge.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/db';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import type { DriftTestBed } from '../support/drift-test-bed';
import { newTestBed, stack, temporalHarness, workerLogs, type TemporalHarness } from '../support/stack';

describe('pull requests and merge', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  const t: Record<string, string> = {};

  beforeAll(async () => {
    h = await temporalHarness('pull-requests');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    const org = `pr-${Date.now()}`;
    Object.assign(t, await roleTokens(db, org));
    api = await startTestApi(h, db);
    bed = await newTestBed();
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
  });

  const settled = (sessionId: string, rounds: number) =>
    waitForSession(api, t.developer ?? '', sessionId, rounds);

  it('creates the pull request, refuses the merge while locked, merges for real once unlocked, and ends the session', async () => {
    await bed.inject('ingress');
    const started = await api.call('POST', '/api/v1/drift/partial', t.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-pr',
      text: 'Resolve the drift on security group sg-web-demo.',
    });
    const sessionId = started.body.session_id as string;
    await settled(sessionId, 1);

    const pr = await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops);
    expect(pr.status).toBe(201);
    expect(pr.body).toMatchObject({
      provider: 'local',
      status: 'open',
      head: `kumoss/${sessionId}`,
      base: 'main',
    });
    expect(pr.body.title).toMatch(/^Reconcile drift/);
    expect(pr.body.description).toContain('Drift sessions end at this merge');
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops)).status).toBe(200);

    // Locks are the admins'.
    expect(
      (await api.call('PUT', `/api/v1/admin/sessions/${sessionId}/lock`, t.devops, { reason: 'x' })).status,
    ).toBe(403);
    expect(
      (
        await api.call('PUT', `/api/v1/admin/sessions/${sessionId}/lock`, t.admin, {
          reason: 'change freeze',
        })
      ).status,
    ).toBe(200);
    const locks = await api.call('GET', '/api/v1/admin/locks', t.admin);
    expect(locks.body.locks).toEqual([
      expect.objectContaining({ session_id: sessionId, reason: 'change freeze' }),
    ]);
    const refused = await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'locked' });
    expect((await settled(sessionId, 1)).rounds).toHaveLength(1);

    expect((await api.call('DELETE', `/api/v1/admin/sessions/${sessionId}/lock`, t.admin)).status).toBe(200);
    const merge = await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops);
    expect(merge.status).toBe(202);
    const d = await settled(sessionId, 2);
    expect(d.status).toBe('MERGED');
    const merged = await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer);
    expect(merged.body).toMatchObject({ status: 'merged' });

    // The merge is real: main on the host now contains the session branch.
    const bare = join(stack().gitReposDir, new URL(bed.repoUrl).pathname.slice(1));
    const main = execFileSync('git', ['rev-parse', 'refs/heads/main'], { cwd: bare }).toString().trim();
    expect(main).toBe(merged.body.merge_commit);
    execFileSync(
      'git',
      ['merge-base', '--is-ancestor', `refs/heads/kumoss/${sessionId}`, 'refs/heads/main'],
      { cwd: bare },
    );

    // The session ended at the merge.
    const late = await api.call('POST', '/api/v1/drift/full', t.devops, {
      session_id: sessionId,
      text: 'Reconcile everything.',
    });
    expect(late.status).toBe(202);
    await new Promise((r) => setTimeout(r, 800));
    expect((await settled(sessionId, 2)).rounds).toHaveLength(2);
    expect(workerLogs).toContain(`Session ${sessionId} is finished and cannot be resumed.`);
  });

  it('refuses a pull request before any round changed the code, and a merge without a pull request', async () => {
    const started = await api.call('POST', '/api/v1/drift/full', t.devops, {
      repository_url: `${stack().gitHostUrl}/pr-missing-${Date.now()}.git`,
      cloud: 'aws',
      scope_id: 'scope-pr',
      text: 'Reconcile everything.',
    });
    const sessionId = started.body.session_id as string;
    await settled(sessionId, 1);
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops)).status).toBe(409);
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops)).status).toBe(409);
  });
});
