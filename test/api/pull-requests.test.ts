// Pull requests on the embedded git host (a reviewed branch merge: the host is no forge), as
// session operations: created by the session workflow from the session branch with a generated
// title and description against the repository's default branch, merged for real (and pushed),
// refused while the session is locked; the drift session ends at the merge and its workflow
// completes.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import type { DriftTestBed } from '../support/drift-test-bed';
import { GitHubPullRequests } from '../../activities/github';
import { createDriftTestBed } from '../support/drift-test-bed';
import { startGitHubLoopback, type GitHubLoopback } from '../support/github-loopback';
import {
  engineDeps,
  gitClient,
  newTestBed,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

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

    const asked = await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops);
    expect(asked.status).toBe(202);
    expect(asked.body).toMatchObject({ session_id: sessionId, accepted: true });
    const prRound = (await settled(sessionId, 2)).rounds[1];
    expect(prRound).toMatchObject({
      round_id: asked.body.round_id,
      kind: 'pull_request',
      status: 'completed',
    });
    const pr = await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer);
    expect(pr.status).toBe(200);
    expect(pr.body).toMatchObject({
      provider: 'git_host',
      number: null,
      url: null,
      status: 'open',
      head: `kumoss/${sessionId}`,
      base: 'main',
    });
    expect(pr.body.title).toMatch(/^Reconcile drift/);
    expect(pr.body.description).toContain('Drift sessions end at this merge');
    // Asking again answers the recorded pull request: nothing is opened twice.
    const again = await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(pr.body);

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
    expect((await settled(sessionId, 2)).rounds).toHaveLength(2);

    expect((await api.call('DELETE', `/api/v1/admin/sessions/${sessionId}/lock`, t.admin)).status).toBe(200);
    const merge = await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops);
    expect(merge.status).toBe(202);
    const d = await settled(sessionId, 3);
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

    // The session ended at the merge, and so did its workflow.
    await h.client.workflow.getHandle(`session:${sessionId}`).result();
    const late = await api.call('POST', '/api/v1/drift/full', t.devops, {
      session_id: sessionId,
      text: 'Reconcile everything.',
    });
    expect(late.status).toBe(202);
    expect(late.body).toMatchObject({
      accepted: false,
      reason: `Session ${sessionId} is finished and cannot be resumed.`,
    });
    expect((await settled(sessionId, 3)).rounds).toHaveLength(3);
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

describe('pull requests on GitHub (loopback GitHub REST API), as session operations', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let gh: GitHubLoopback;
  const t: Record<string, string> = {};

  beforeAll(async () => {
    gh = await startGitHubLoopback('main');
    const client = new GitHubPullRequests({ token: 'ghp_loopback', baseUrl: gh.baseUrl });
    // The git host stands for github.com here: its host name is served by the GitHub API.
    h = await temporalHarness(
      'pull-requests-github',
      testActivities({ github: { client, hosts: [new URL(stack().gitHostUrl).hostname] } }),
    );
    db = createDb(stack().databaseUrl);
    await migrate(db);
    Object.assign(t, await roleTokens(db, `prgh-${Date.now()}`));
    api = await startTestApi(h, db);
    bed = await createDriftTestBed({
      gitHostUrl: stack().gitHostUrl,
      git: gitClient(),
      engine: engineDeps(),
      name: `acme/infra-${Date.now()}`,
    });
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    await gh?.close();
  });

  it('opens the pull request on the forge with its number and URL, and a merge whose reply is lost is merged once', async () => {
    await bed.inject('ingress');
    const started = await api.call('POST', '/api/v1/drift/partial', t.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-pr',
      text: 'Resolve the drift on security group sg-web-demo.',
    });
    const sessionId = started.body.session_id as string;
    await waitForSession(api, t.developer ?? '', sessionId, 1);
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops)).status).toBe(202);
    await waitForSession(api, t.developer ?? '', sessionId, 2);
    const repo = new URL(bed.repoUrl).pathname.slice(1).replace(/\.git$/, '');
    const pr = await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer);
    expect(pr.body).toMatchObject({
      provider: 'github',
      number: 1,
      url: `https://github.com/${repo}/pull/1`,
      head: `kumoss/${sessionId}`,
      base: 'main',
      status: 'open',
    });
    expect(gh.pulls.get(repo)).toHaveLength(1);

    gh.loseNextReply('merge');
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops)).status).toBe(202);
    const d = await waitForSession(api, t.developer ?? '', sessionId, 3);
    const merged = gh.pulls.get(repo)?.[0];
    expect(d.status).toBe('MERGED');
    expect(d.rounds[2]).toMatchObject({
      kind: 'merge',
      status: 'completed',
      commit: merged?.merge_commit_sha,
    });
    expect(gh.seen.filter((s) => s.method === 'PUT')).toHaveLength(1);
    const after = await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer);
    expect(after.body).toMatchObject({ status: 'merged', merge_commit: merged?.merge_commit_sha });
  });
});
