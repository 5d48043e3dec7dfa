// Pull requests on a real forge: Gitea 1.27.3 (built by setup from the Go module proxy, its web
// assets from its own package.json) on loopback over HTTPS. A drift session on a repository that
// lives there opens a real pull request — a page a person can open, with the diff — and merges it
// through Gitea's API; Gitea's main branch then has the session branch. Where the repository's
// branch protection requires approvals, Kumoss's merge waits for them: Gitea refuses it (Kumoss
// never forces a merge), the session stays open, and the merge goes through once a reviewer approved.
import { dirname, join } from 'node:path';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitClient } from '../../activities/git';
import { GiteaPullRequests } from '../../activities/gitea';
import { requestJson } from '../../shared/infra/http-json';
import { ensureGitConnection } from '../../shared/infra/db/git-connections';
import { findUserByToken } from '../../shared/infra/db/users';
import { createDb, type Db } from '../../shared/infra/db';
import { startGitea, type EmbeddedGitea } from '../../scripts/embedded/gitea';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { createDriftTestBed, type DriftTestBed } from '../support/drift-test-bed';
import { engineDeps, stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';
import { needsBackgroundBuilds } from '../support/background-builds';

describe('pull requests on Gitea, a real forge', () => {
  needsBackgroundBuilds('gitea');
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-gitea-'));
  let gitea: EmbeddedGitea;
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let ca: string;
  const t: Record<string, string> = {};

  beforeAll(async () => {
    // Setup builds Gitea in the background (minutes on a fresh machine).
    gitea = await startGitea({ dir, certsDir: dirname(stack().gitCaFile) });
    ca = readFileSync(gitea.caPath, 'utf8');
    const git = new GitClient({ caFile: stack().gitCaFile, hostTokens: { [gitea.url]: gitea.token } });
    h = await temporalHarness(
      'pull-requests-gitea',
      testActivities({
        git,
        // The operator's GITEA_TOKEN, for the organizations that connect the Gitea host.
        gitTokens: { [gitea.url]: gitea.token },
        gitea: { url: gitea.url, client: new GiteaPullRequests({ url: gitea.url, token: gitea.token, ca }) },
      }),
    );
    db = createDb(stack().databaseUrl);
    Object.assign(t, await roleTokens(db, `prgt-${Date.now()}`));
    const admin = await findUserByToken(db, t.admin as string);
    await ensureGitConnection(db, admin?.organization_uuid as string, gitea.url, 'gitea');
    api = await startTestApi(h, db);
    bed = await createDriftTestBed({
      gitHostUrl: `${gitea.url}/${gitea.owner}`,
      git,
      engine: engineDeps(),
      name: `infra-${Date.now()}`,
    });
  }, 40 * 60_000);
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    await gitea?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('opens a real pull request with a page and its diff, and merges it through Gitea', async () => {
    await bed.inject('ingress');
    const started = await api.call('POST', '/api/v1/drift/partial', t.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-gitea',
      text: 'Resolve the drift on security group sg-web-demo.',
    });
    expect(started.status).toBe(202);
    const sessionId = started.body.session_id as string;
    expect((await waitForSession(api, t.developer ?? '', sessionId, 1)).rounds[0]).toMatchObject({
      status: 'completed',
      outcome: 'Succeeded',
    });
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops)).status).toBe(202);
    await waitForSession(api, t.developer ?? '', sessionId, 2);
    const repo = new URL(bed.repoUrl).pathname.slice(1).replace(/\.git$/, '');
    const pr = (await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer)).body;
    expect(pr).toMatchObject({
      provider: 'gitea',
      number: 1,
      url: `${gitea.url}/${repo}/pulls/1`,
      head: `kumoss/${sessionId}`,
      base: 'main',
      status: 'open',
    });

    // The page a person opens: Gitea renders the pull request and its diff (the added rule).
    const page = await new Promise<string>((resolve, reject) => {
      void import('node:https').then(({ get }) =>
        get(`${pr.url as string}/files`, { ca }, (res) => {
          let html = '';
          res.on('data', (d: Buffer) => (html += d.toString()));
          res.on('end', () =>
            res.statusCode === 200 ? resolve(html) : reject(new Error(`HTTP ${res.statusCode}`)),
          );
        }).on('error', reject),
      );
    });
    expect(page).toContain(pr.title as string);
    expect(page).toContain('8080');
    expect(page).toMatch(/<link rel="stylesheet" href="[^"]*\/assets\/css\/index\.[^"]*\.css"/);

    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops)).status).toBe(202);
    const d = await waitForSession(api, t.developer ?? '', sessionId, 3);
    expect(d.status).toBe('MERGED');
    const onGitea = (await requestJson(`${gitea.url}/api/v1/repos/${repo}/pulls/1`, {
      headers: { authorization: `token ${gitea.token}` },
      ca,
    })) as { merged: boolean; merge_commit_sha: string };
    expect(onGitea.merged).toBe(true);
    expect(d.rounds[2]).toMatchObject({
      kind: 'merge',
      status: 'completed',
      commit: onGitea.merge_commit_sha,
    });
    const main = (await requestJson(`${gitea.url}/api/v1/repos/${repo}/branches/main`, {
      headers: { authorization: `token ${gitea.token}` },
      ca,
    })) as { commit: { id: string } };
    expect(main.commit.id).toBe(onGitea.merge_commit_sha);
  });

  it("honours the repository's required approvals: the merge is refused until a reviewer approved", async () => {
    const protectedBed = await createDriftTestBed({
      gitHostUrl: `${gitea.url}/${gitea.owner}`,
      git: new GitClient({ caFile: stack().gitCaFile, hostTokens: { [gitea.url]: gitea.token } }),
      engine: engineDeps(),
      name: `protected-${Date.now()}`,
    });
    try {
      const repo = new URL(protectedBed.repoUrl).pathname.slice(1).replace(/\.git$/, '');
      const asKumoss = { authorization: `token ${gitea.token}` };
      // main needs one approving review before anything merges into it (Gitea's branch protection).
      await requestJson(`${gitea.url}/api/v1/repos/${repo}/branch_protections`, {
        method: 'POST',
        headers: asKumoss,
        body: { rule_name: 'main', enable_push: true, required_approvals: 1 },
        ca,
      });
      await protectedBed.inject('ingress');
      const started = await api.call('POST', '/api/v1/drift/partial', t.devops, {
        repository_url: protectedBed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-gitea-protected',
        text: 'Resolve the drift on security group sg-web-demo.',
      });
      const sessionId = started.body.session_id as string;
      await waitForSession(api, t.developer ?? '', sessionId, 1);
      await api.call('POST', `/api/v1/sessions/${sessionId}/pull-request`, t.devops);
      await waitForSession(api, t.developer ?? '', sessionId, 2);
      const pr = (await api.call('GET', `/api/v1/sessions/${sessionId}/pull-request`, t.developer)).body;

      // Kumoss's merge does not override the protection (its token is the repository's admin).
      expect((await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops)).status).toBe(202);
      const refused = await waitForSession(api, t.developer ?? '', sessionId, 3);
      expect(refused.status).toBe('ACTIVE');
      expect(refused.rounds[2]).toMatchObject({ kind: 'merge', status: 'failed' });
      expect(refused.rounds[2]?.failure_reason).toMatch(
        /^Gitea refused to merge pull request #\d+ \(HTTP 405\)/,
      );
      const stillOpen = (await requestJson(`${gitea.url}/api/v1/repos/${repo}/pulls/${String(pr.number)}`, {
        headers: asKumoss,
        ca,
      })) as { merged: boolean; state: string };
      expect(stillOpen).toMatchObject({ merged: false, state: 'open' });

      // A reviewer with write access approves the pull request on Gitea.
      const reviewer = `reviewer${Date.now()}`;
      const password = `pw-${Date.now()}-Aa1!`;
      await requestJson(`${gitea.url}/api/v1/admin/users`, {
        method: 'POST',
        headers: asKumoss,
        body: { username: reviewer, email: `${reviewer}@example.com`, password, must_change_password: false },
        ca,
      });
      await requestJson(`${gitea.url}/api/v1/repos/${repo}/collaborators/${reviewer}`, {
        method: 'PUT',
        headers: asKumoss,
        body: { permission: 'write' },
        ca,
      });
      await requestJson(`${gitea.url}/api/v1/repos/${repo}/pulls/${String(pr.number)}/reviews`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${reviewer}:${password}`).toString('base64')}` },
        body: { event: 'APPROVED', body: 'Looks right.' },
        ca,
      });

      expect((await api.call('POST', `/api/v1/sessions/${sessionId}/merge`, t.devops)).status).toBe(202);
      const merged = await waitForSession(api, t.developer ?? '', sessionId, 4);
      expect(merged.status).toBe('MERGED');
      expect(merged.rounds[3]).toMatchObject({ kind: 'merge', status: 'completed' });
    } finally {
      await protectedBed.destroy();
    }
  });
});
