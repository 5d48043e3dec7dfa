// Generate rounds and apply over the real HTTP API, on the AWS-shaped test bed (kumoss/aws into
// moto): the offline model writes a tag, the valid plan is pinned (its SHA-256, commit and state
// serial) and the session locked; merging waits; apply runs exactly that plan and clears the lock;
// a fresh plan is clean and the cloud has the tag. Declined requests, a drift request in generate
// mode and a stale plan each end their round with the reason, and the session goes on.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DeleteSecurityGroupCommand, DescribeSecurityGroupsCommand } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { GENERATE_MISMATCH, type PinnedPlan, type SessionRound } from '../../shared/contracts';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { NEEDS_MODEL } from '../../activities/model/offline-generate';
import { postAccepted, roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { awsClients, type AwsTestBed } from '../support/aws-test-bed';
import {
  artifactStore,
  engineDeps,
  gitClient,
  stack,
  temporalHarness,
  type TemporalHarness,
  demoAwsBed,
} from '../support/stack';
import { needsBackgroundBuilds } from '../support/background-builds';

interface Detail {
  status: string;
  rounds: SessionRound[];
  locked: boolean;
  lock_kind: string | null;
  lock_reason: string | null;
  pinned_plan: PinnedPlan | null;
  branch: string;
}

describe('generate rounds and apply', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: AwsTestBed;
  const tokens: Record<string, string> = {};
  const dirs: string[] = [];

  beforeAll(async () => {
    const s = stack();
    h = await temporalHarness('generate');
    db = createDb(s.databaseUrl);
    await migrate(db);
    Object.assign(tokens, await roleTokens(db, 'org-generate'));
    api = await startTestApi(h, db);
    bed = await demoAwsBed();
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const first = (text: string) => ({
    repository_url: bed.repoUrl,
    cloud: 'aws',
    scope_id: '123456789012',
    iac_path: bed.iacPath,
    text,
  });
  const settled = async (sessionId: string, rounds: number): Promise<Detail> =>
    (await waitForSession(api, tokens.developer ?? '', sessionId, rounds)) as unknown as Detail;
  const post = (path: string, body?: unknown) => postAccepted(api, tokens.devops ?? '', path, body);
  /** A plan of the session branch against the real state: whether anything is left to do. */
  const freshPlanHasChanges = async (branch: string): Promise<boolean> => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-generate-verify-'));
    dirs.push(dir);
    await gitClient().checkout({ url: bed.repoUrl, dir, branch });
    const engine = new EngineClient({
      ...engineDeps('terraform', stack().awsEndpoint),
      workdir: join(dir, bed.iacPath),
      scopeId: 'scope-test',
    });
    return (await engine.plan({ out: join(dir, 'verify.tfplan') })).hasChanges;
  };
  const webTags = async () => {
    const out = await awsClients(stack().awsEndpoint).ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [bed.ids.get('aws_security_group.web') ?? ''] }),
    );
    return Object.fromEntries(
      (out.SecurityGroups?.[0]?.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']),
    ) as Record<string, string>;
  };

  it('pins the plan of an offline tag change, locks merging, applies exactly that plan, and leaves nothing to plan', async () => {
    const start = await post('/api/v1/generate', first('Add tag Team=platform to sg-web-demo'));
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(
      expect.objectContaining({ kind: 'generate', status: 'completed', round_id: start.round_id }),
    );
    expect(d.rounds[0]?.summary).toMatch(
      /^Added the tag Team=platform to aws_security_group\.web\. Plan pinned: 0 to create, 1 to update, 0 to replace, 0 to destroy\. Compliance: passed\.$/,
    );
    const pinned = d.pinned_plan as PinnedPlan;
    expect(pinned.impact).toEqual({
      create: 0,
      update: 1,
      replace: 0,
      destroy: 0,
      destroyed: [],
      replaced: [],
      changes: [{ address: 'aws_security_group.web', action: 'update' }],
      targets: ['aws_security_group.web'],
      not_in_plan: [],
    });
    // The stored plan file is the one whose hash is pinned; the commit is the branch's head.
    const planCopy = join(mkdtempSync(join(tmpdir(), 'kumoss-generate-plan-')), 'pinned.tfplan');
    dirs.push(dirname(planCopy));
    await artifactStore().download(pinned.key, planCopy);
    const bytes = readFileSync(planCopy);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(pinned.sha256);
    expect((await gitClient().remoteBranches(bed.repoUrl)).get(d.branch)).toBe(pinned.commit);
    expect(pinned.state_serial).toEqual(expect.any(Number));
    // The compliance audit (OPA, policies/aws) passed, and its report is an artifact.
    expect(pinned.compliance).toEqual(
      expect.objectContaining({ passed: true, deny: [], warn: [], policies: 'policies/aws' }),
    );
    expect(JSON.parse(await artifactStore().getText(pinned.compliance?.report_key ?? ''))).toEqual(
      expect.objectContaining({ passed: true, sha256: pinned.sha256 }),
    );
    expect(d.locked).toBe(true);
    expect(d.lock_kind).toBe('plan');
    expect(await webTags()).toEqual({ Name: 'sg-web-demo' }); // nothing applied yet

    // The pull request opens; merging it waits for the apply.
    await post(`/api/v1/sessions/${start.session_id}/pull-request`);
    expect((await settled(start.session_id, 2)).rounds[1]).toEqual(
      expect.objectContaining({ kind: 'pull_request', status: 'completed' }),
    );
    const refused = await api.call('POST', `/api/v1/sessions/${start.session_id}/merge`, tokens.devops);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      error: {
        code: 'locked',
        message: `Session ${start.session_id} is locked: A reviewed plan is pinned (round ${start.round_id}): merging waits until it is applied or an admin clears the lock.`,
      },
    });

    const apply = await post(`/api/v1/sessions/${start.session_id}/apply`);
    const applied = await settled(start.session_id, 3);
    expect(applied.rounds[2]).toEqual(
      expect.objectContaining({ round_id: apply.round_id, kind: 'apply', status: 'completed' }),
    );
    expect(applied.rounds[2]?.summary).toBe(
      `Applied the pinned plan of round ${start.round_id}: 0 to create, 1 to update, 0 to replace, 0 to destroy. A fresh plan of aws_security_group.web shows no change.`,
    );
    expect(applied.status).toBe('ACTIVE');
    expect(applied.locked).toBe(false);
    expect(applied.pinned_plan).toBeNull();
    expect(await webTags()).toEqual({ Name: 'sg-web-demo', Team: 'platform' });
    expect(await freshPlanHasChanges(applied.branch)).toBe(false);
    const log = await artifactStore().getText(applied.rounds[2]?.report_key ?? '');
    expect(log).toMatch(/Apply complete! Resources: 0 added, 1 changed, 0 destroyed\./);

    // Applied and unlocked: the pull request merges, and the session ends there.
    await post(`/api/v1/sessions/${start.session_id}/merge`);
    const merged = await settled(start.session_id, 4);
    expect(merged.rounds[3]).toEqual(expect.objectContaining({ kind: 'merge', status: 'completed' }));
    expect(merged.status).toBe('MERGED');
  });

  it('a deny-level compliance finding blocks apply until an admin overrides it with a reason', async () => {
    const start = await post(
      '/api/v1/generate',
      first('Add an ingress rule tcp 22 from 0.0.0.0/0 to aws_security_group.web'),
    );
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]?.status).toBe('completed');
    expect(d.rounds[0]?.summary).toMatch(/Compliance: 1 deny-level finding\(s\) — apply is blocked\.$/);
    expect(d.pinned_plan?.compliance).toEqual(
      expect.objectContaining({
        passed: false,
        deny: ['aws_security_group.web: ingress from the whole internet on admin port 22'],
      }),
    );
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    const blocked = await settled(start.session_id, 2);
    expect(blocked.rounds[1]).toEqual(
      expect.objectContaining({
        kind: 'apply',
        status: 'uncompleted',
        reason:
          'The pinned plan violates 1 deny-level compliance policy: aws_security_group.web: ingress from the whole internet on admin port 22. Run a generate round that fixes it, or an admin overrides it with a recorded reason.',
      }),
    );
    expect(blocked.status).toBe('ACTIVE');
    const path = `/api/v1/admin/sessions/${start.session_id}/compliance-override`;
    expect((await api.call('POST', path, tokens.devops, { reason: 'bastion migration' })).status).toBe(403);
    expect((await api.call('POST', path, tokens.admin, { reason: ' ' })).status).toBe(400);
    const ok = await api.call('POST', path, tokens.admin, { reason: 'Bastion migration, ticket OPS-42' });
    expect(ok.status).toBe(200);
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    const applied = await settled(start.session_id, 3);
    expect(applied.rounds[2]).toEqual(expect.objectContaining({ kind: 'apply', status: 'completed' }));
    const log = await artifactStore().getText(applied.rounds[2]?.report_key ?? '');
    expect(log.split('\n')[0]).toBe(
      'Compliance findings overridden by an admin: Bastion migration, ticket OPS-42',
    );
  });

  it('declines what the offline model cannot do, and drift requests, with the reason; the session goes on', async () => {
    const start = await post('/api/v1/generate', first('Create an S3 bucket for the access logs'));
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(expect.objectContaining({ kind: 'generate', status: 'uncompleted' }));
    // Declined, with what it does carry out, from this root's own resources.
    expect(
      d.rounds[0]?.reason?.startsWith(
        `${NEEDS_MODEL} It carries out requests such as "add the tag Team = platform to sg-web-demo"`,
      ),
    ).toBe(true);
    expect(d.pinned_plan).toBeNull();
    expect(d.locked).toBe(false);
    await post('/api/v1/generate', {
      session_id: start.session_id,
      text: 'Resolve the drift on sg-web-demo; someone opened port 8080 in the console.',
    });
    const mismatch = await settled(start.session_id, 2);
    expect(mismatch.rounds[1]).toEqual(
      expect.objectContaining({ status: 'uncompleted', reason: GENERATE_MISMATCH }),
    );
    expect(mismatch.status).toBe('ACTIVE');
  });

  it('refuses a plan that is stale because the branch moved, and a new generate round can pin a fresh one', async () => {
    const start = await post('/api/v1/generate', first('Add tag CostCenter=42 to aws_security_group.web'));
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]?.status).toBe('completed');
    // Someone pushes to the session branch after the review.
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-generate-push-'));
    dirs.push(dir);
    const git = gitClient();
    await git.checkout({ url: bed.repoUrl, dir, branch: d.branch });
    await git.run(['commit', '--allow-empty', '--quiet', '-m', 'a change after the review'], dir);
    await git.push(dir, d.branch);
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    const stale = await settled(start.session_id, 2);
    expect(stale.rounds[1]).toEqual(expect.objectContaining({ kind: 'apply', status: 'uncompleted' }));
    expect(stale.rounds[1]?.reason).toMatch(
      /^The pinned plan is stale: the session branch moved from [0-9a-f]{12} to [0-9a-f]{12} since it was planned; run a new generate round\.$/,
    );
    expect(stale.status).toBe('ACTIVE');
    expect(await webTags()).not.toHaveProperty('CostCenter');
    // A new generate round replaces the stale plan with one made from the branch as it is now.
    const again = await post('/api/v1/generate', {
      session_id: start.session_id,
      text: 'Add tag Owner=platform to aws_security_group.web',
    });
    const fresh = await settled(start.session_id, 3);
    expect(fresh.rounds[2]).toEqual(
      expect.objectContaining({ round_id: again.round_id, status: 'completed' }),
    );
    expect(fresh.pinned_plan?.round_id).toBe(again.round_id);
    expect(fresh.pinned_plan?.commit).toBe((await gitClient().remoteBranches(bed.repoUrl)).get(d.branch));
    expect(fresh.pinned_plan?.commit).not.toBe(d.pinned_plan?.commit);
  });

  it('a failed apply fails the round and the session with the engine’s first error, and keeps the log', async () => {
    const start = await post('/api/v1/generate', first('Add tag Stage=review to aws_security_group.web'));
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(expect.objectContaining({ status: 'completed' }));
    expect(d.pinned_plan?.compliance?.passed).toBe(true);
    // Between review and apply, someone deletes the group in the console: the cloud refuses the
    // plan's change, though neither the branch nor the state moved (a saved plan is not refreshed).
    await awsClients(stack().awsEndpoint).ec2.send(
      new DeleteSecurityGroupCommand({ GroupId: bed.ids.get('aws_security_group.web') ?? '' }),
    );
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    const failed = await settled(start.session_id, 2);
    expect(failed.rounds[1]).toEqual(expect.objectContaining({ kind: 'apply', status: 'failed' }));
    expect(failed.rounds[1]?.failure_reason).toMatch(/aws_security_group\.web: .*NotFound/);
    expect(failed.status).toBe('FAILED');
    // The failed round keeps the apply log: what the engine said.
    expect(failed.rounds[1]?.report_key).toMatch(/\/apply\/apply\.log$/);
    const log = await artifactStore().getText(failed.rounds[1]?.report_key ?? '');
    expect(log).toMatch(/Error: .*NotFound/);
  });
});
