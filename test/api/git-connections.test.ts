// Repository connections (issue 26 item 1): an organization's admin registers the git hosts its
// repositories live on, with the organization's own credential (sealed, never returned). A
// repository URL on a host the organization has not connected is refused where it enters, and git
// sends an organization's credential to that host for that organization's runs only.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAuthRecorder, type AuthRecorder } from '../support/auth-recorder';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitAccess } from '../../activities/git-access';
import { GitClient } from '../../activities/git';
import { ensureCertificates } from '../../scripts/embedded/git-host';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { createGitConnection } from '../../shared/infra/db/git-connections';
import { findUserByToken } from '../../shared/infra/db/users';
import type { SecretBox } from '../../shared/infra/secret-box';
import { secretBoxFromEnv } from '../../shared/infra/secret-box';
import { insertSessionRow, roleTokens, startTestApi, type TestApi } from '../support/api';
import { createPullRequestActivities } from '../../activities/pull-requests';
import { OfflineModel } from '../../activities/model/offline';
import { SECRET_MARKER } from '../support/secret-scan';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

const basic = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;

describe('git connections', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-git-conn-'));
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let a: Awaited<ReturnType<typeof roleTokens>>;
  let b: Awaited<ReturnType<typeof roleTokens>>;
  let orgA: string;
  let orgB: string;
  let caFile: string;
  let forge: AuthRecorder;
  const TOKEN_A = `glpat-${SECRET_MARKER}-org-a-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    const certs = await ensureCertificates(join(dir, 'certs'));
    caFile = certs.caPath;
    forge = await startAuthRecorder(certs);
    h = await temporalHarness('git-connections');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    a = await roleTokens(db, 'git-conn-a');
    b = await roleTokens(db, 'git-conn-b');
    orgA = (await findUserByToken(db, a.admin))?.organization_uuid as string;
    orgB = (await findUserByToken(db, b.admin))?.organization_uuid as string;
    api = await startTestApi(h, db);
  });
  afterAll(async () => {
    api?.close();
    forge?.server.close();
    await db?.destroy();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const repo = (name = `team/infra-${randomUUID().slice(0, 6)}`) => `${forge.origin}/${name}.git`;
  const drift = (token: string, repositoryUrl: string) =>
    api.call('POST', '/api/v1/drift/full', token, {
      repository_url: repositoryUrl,
      cloud: 'aws',
      scope_id: 'scope-conn',
      text: 'Reconcile everything.',
    });
  const sessionsOf = async (org: string) =>
    (await db.selectFrom('sessions').select('session_id').where('organization_uuid', '=', org).execute())
      .length;

  it('an admin registers a host with a credential that is stored sealed and never returned', async () => {
    const created = await api.call('POST', '/api/v1/admin/connections/git', a.admin, {
      origin: `${forge.origin}/`,
      kind: 'gitlab',
      credential: TOKEN_A,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ origin: forge.origin, kind: 'gitlab', has_credential: true });
    expect(JSON.stringify(created.body)).not.toContain(TOKEN_A);
    const listed = await api.call('GET', '/api/v1/admin/connections/git', a.admin);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).not.toContain(TOKEN_A);
    expect((listed.body.git_connections as { origin: string }[]).map((c) => c.origin)).toContain(
      forge.origin,
    );

    const row = await db
      .selectFrom('git_connections')
      .select('credential_sealed')
      .where('organization_uuid', '=', orgA)
      .where('origin', '=', forge.origin)
      .executeTakeFirstOrThrow();
    expect(row.credential_sealed).toMatch(/^v1:/);
    expect(row.credential_sealed).not.toContain(TOKEN_A);

    // Once per organization and host.
    const again = await api.call('POST', '/api/v1/admin/connections/git', a.admin, { origin: forge.origin });
    expect(again.status).toBe(409);
  });

  it('refuses what is not an https origin, a private host, and callers who are not admins', async () => {
    const before = (await api.call('GET', '/api/v1/admin/connections/git', a.admin)).body.git_connections;
    for (const [origin, why] of [
      ['http://git-other.example.com', 'must use https://'],
      ['https://git-other.example.com/team/repo.git', 'must be an origin only'],
      ['https://user:pw@git-other.example.com', 'must not carry a user name or password'],
      ['https://10.0.0.7', 'private, loopback or link-local'],
    ] as const) {
      const r = await api.call('POST', '/api/v1/admin/connections/git', a.admin, { origin });
      expect(r.status, origin).toBe(400);
      expect(JSON.stringify(r.body), origin).toContain(why);
    }
    const spaced = await api.call('POST', '/api/v1/admin/connections/git', a.admin, {
      origin: 'https://git-other.example.com',
      credential: 'two words',
    });
    expect(spaced.status).toBe(400);
    for (const [method, path] of [
      ['GET', '/api/v1/admin/connections/git'],
      ['POST', '/api/v1/admin/connections/git'],
    ] as const) {
      const r = await api.call(
        method,
        path,
        a.devops,
        method === 'POST' ? { origin: 'https://git-other.example.com' } : undefined,
      );
      expect(r.status).toBe(403);
    }
    // Nothing was registered by the refused calls: organization A still has only what it had.
    expect((await api.call('GET', '/api/v1/admin/connections/git', a.admin)).body.git_connections).toEqual(
      before,
    );
  });

  it("a repository on a host the organization has not connected is refused, and another organization's host is not its own", async () => {
    // Organization A connected the forge above; B has not.
    const before = await sessionsOf(orgB);
    const refused = await drift(b.devops, repo());
    expect(refused.status).toBe(400);
    expect(String((refused.body.error as { message: string }).message)).toMatch(
      new RegExp(
        `^repository_url: ${forge.origin.replace(/[.:/]/g, '\\$&')} is not a git connection of your organization`,
      ),
    );
    const stackRefused = await api.call('POST', '/api/v1/stacks', b.devops, {
      name: `s-${randomUUID().slice(0, 6)}`,
      repository_url: repo(),
      cloud: 'aws',
      scope_id: 'scope-conn',
      schedule: { interval_minutes: 60 },
    });
    expect(stackRefused.status).toBe(400);
    expect(String((stackRefused.body.error as { message: string }).message)).toContain(
      'is not a git connection of your organization',
    );
    expect(await sessionsOf(orgB)).toBe(before);
    expect(
      await db.selectFrom('stacks').select('stack_uuid').where('organization_uuid', '=', orgB).execute(),
    ).toEqual([]);

    // B cannot see or remove A's connection either.
    const listedB = await api.call('GET', '/api/v1/admin/connections/git', b.admin);
    expect((listedB.body.git_connections as { origin: string }[]).map((c) => c.origin)).not.toContain(
      forge.origin,
    );
    const idA = (
      await db
        .selectFrom('git_connections')
        .select('git_connection_uuid')
        .where('organization_uuid', '=', orgA)
        .where('origin', '=', forge.origin)
        .executeTakeFirstOrThrow()
    ).git_connection_uuid;
    expect((await api.call('DELETE', `/api/v1/admin/connections/git/${idA}`, b.admin)).status).toBe(404);

    // A's devops may name it: the session is accepted.
    expect((await drift(a.devops, repo())).status).toBe(202);
  });

  it('a cloud connection naming a role to assume is an admin’s: a devops user gets 403 and nothing is stored', async () => {
    const spec = {
      name: `role-${randomUUID().slice(0, 6)}`,
      provider: 'aws',
      region: 'eu-west-1',
      role_arn: 'arn:aws:iam::210987654321:role/someone-elses-role',
    };
    const byDevops = await api.call('POST', '/api/v1/cloud-connections', a.devops, spec);
    expect(byDevops.status).toBe(403);
    expect(byDevops.body).toMatchObject({
      error: { message: 'Only an admin names a role in a cloud connection.' },
    });
    const listed = await api.call('GET', '/api/v1/cloud-connections', a.admin);
    expect(JSON.stringify(listed.body)).not.toContain(spec.name);
    expect((await api.call('POST', '/api/v1/cloud-connections', a.admin, spec)).status).toBe(201);
  });

  it("a cloud connection's credentials are stored by an admin only, sealed, and never returned", async () => {
    const secret = `${SECRET_MARKER}-azure-${randomUUID().slice(0, 6)}`;
    const spec = {
      name: `azure-${randomUUID().slice(0, 6)}`,
      provider: 'azure',
      region: 'westeurope',
      credentials: { client_id: 'c', client_secret: secret, tenant_id: 't', subscription_id: 's' },
    };
    const byDevops = await api.call('POST', '/api/v1/cloud-connections', a.devops, spec);
    expect(byDevops.status).toBe(403);
    const missing = await api.call('POST', '/api/v1/cloud-connections', a.admin, {
      ...spec,
      credentials: { client_id: 'c' },
    });
    expect(missing.status).toBe(400);
    expect(JSON.stringify(missing.body)).toContain('missing client_secret, tenant_id, subscription_id');
    const created = await api.call('POST', '/api/v1/cloud-connections', a.admin, spec);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: spec.name, provider: 'azure', has_credentials: true });
    const listed = await api.call('GET', '/api/v1/cloud-connections', a.developer);
    for (const body of [created.body, listed.body]) expect(JSON.stringify(body)).not.toContain(secret);
    const row = await db
      .selectFrom('cloud_connections')
      .select('credentials_sealed')
      .where('name', '=', spec.name)
      .executeTakeFirstOrThrow();
    expect(row.credentials_sealed).toMatch(/^v1:/);
    expect(row.credentials_sealed).not.toContain(secret);
  });

  it("the forge's pull-request API is not used for an organization the operator's token does not serve", async () => {
    const calls: string[] = [];
    const github = {
      defaultBranch: () => (calls.push('defaultBranch'), Promise.resolve('main')),
      open: () => Promise.reject(new Error('not reached')),
      merge: () => Promise.reject(new Error('not reached')),
    };
    const prs = createPullRequestActivities({
      git: new GitClient({ caFile }),
      db,
      model: new OfflineModel(),
      github: github as never,
      githubHosts: ['github.com'],
      gitAccess: new GitAccess({
        git: new GitClient({ caFile }),
        operatorTokens: {},
        operatorOrganizations: [],
        db,
      }),
    });
    const { sessionId } = await insertSessionRow(db, a.devops, {
      repository_url: 'https://github.com/team/infra.git',
    });
    await expect(
      prs.pullRequestFacts({
        sessionId,
        repositoryUrl: 'https://github.com/team/infra.git',
        head: 'kumoss/x',
      }),
    ).rejects.toThrow(/this installation's github token does not serve your organization/);
    await expect(
      prs.mergePullRequest({
        sessionId,
        provider: 'github',
        repositoryUrl: 'https://github.com/team/infra.git',
        number: 1,
        message: 'm',
      }),
    ).rejects.toThrow(/does not serve your organization/);
    expect(calls).toEqual([]);
  });

  it("git sends an organization's credential to its host for that organization's runs only", async () => {
    const box = secretBoxFromEnv() as SecretBox;
    // B connects the same host without a credential of its own; the operator holds a token for it.
    await createGitConnection(db, { organization_uuid: orgB, origin: forge.origin, kind: 'gitlab' });
    const OPERATOR = `${SECRET_MARKER}-operator-token`;
    const nameOf = async (org: string) =>
      (
        await db
          .selectFrom('organizations')
          .select('name')
          .where('organization_uuid', '=', org)
          .executeTakeFirstOrThrow()
      ).name;
    // The operator's tokens serve B (security.operator_git_credentials_for), no other organization.
    const access = new GitAccess({
      git: new GitClient({ caFile }),
      operatorTokens: { [forge.origin]: OPERATOR },
      operatorOrganizations: [await nameOf(orgB)],
      db,
      box,
    });
    const seen = async (org: string | undefined) => {
      forge.authorization.length = 0;
      const git = await access.forRepository(repo(), org);
      await expect(git.remoteBranches(repo())).rejects.toThrow();
      expect(forge.authorization.length).toBeGreaterThan(0);
      return new Set(forge.authorization);
    };
    expect(await seen(orgA)).toEqual(new Set([basic(TOKEN_A)]));
    // B has no credential of its own: the operator's token for the host, never A's.
    expect(await seen(orgB)).toEqual(new Set([basic(OPERATOR)]));
    // An organization that has not connected the host gets nothing at all.
    const c = await roleTokens(db, 'git-conn-c');
    const orgC = (await findUserByToken(db, c.admin))?.organization_uuid as string;
    expect(await seen(orgC)).toEqual(new Set([undefined]));
    // Nor does one that connected it without a credential but is not served by the operator's tokens.
    await createGitConnection(db, { organization_uuid: orgC, origin: forge.origin, kind: 'gitlab' });
    expect(await seen(orgC)).toEqual(new Set([undefined]));
    expect(await access.mayUseOperatorTokens(orgC)).toBe(false);

    // A's sealed credential does not open as anybody else's (bound to organization and host).
    const sealedA = (
      await db
        .selectFrom('git_connections')
        .select('credential_sealed')
        .where('organization_uuid', '=', orgA)
        .where('origin', '=', forge.origin)
        .executeTakeFirstOrThrow()
    ).credential_sealed as string;
    await db
      .updateTable('git_connections')
      .set({ credential_sealed: sealedA })
      .where('organization_uuid', '=', orgB)
      .where('origin', '=', forge.origin)
      .execute();
    await expect(access.forRepository(repo(), orgB)).rejects.toThrow(/does not open/);
    // A worker without the key cannot open a stored credential, and says why.
    const keyless = new GitAccess({ git: new GitClient({ caFile }), operatorTokens: {}, db });
    await expect(keyless.forRepository(repo(), orgA)).rejects.toThrow(/no KUMOSS_SECRETS_KEY/);
  });
});
