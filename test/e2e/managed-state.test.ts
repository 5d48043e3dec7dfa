// Kumoss-managed state across workers (issue 16 item 8), over the real HTTP API on the AWS-shaped
// bed (kumoss/aws into moto): a root that declares no backend keeps its state in the object store
// under its state project id. One worker runs the generate round and pins a plan against that
// state; it stops; another worker, with checkouts of its own, applies the pinned plan — it finds
// the state the plan was made against (same serial and lineage), so the plan is not stale — and a
// fresh checkout then plans nothing. With the state in the first worker's checkout, the second
// would find none and refuse the plan as stale.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeSecurityGroupsCommand } from '@aws-sdk/client-ec2';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { MANAGED_BACKEND_FILE, managedStateKey } from '../../activities/managed-state';
import type { PinnedPlan, SessionRound } from '../../shared/contracts';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { stateProjectId } from '../../shared/infra/db/sessions';
import { createS3Client } from '../../shared/infra/object-store';
import { createWorker, type KumossWorker } from '../../worker/worker';
import { postAccepted, roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { awsClients, type AwsTestBed } from '../support/aws-test-bed';
import {
  engineDeps,
  gitClient,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  demoAwsBed,
} from '../support/stack';
import { stackManagedState } from '../support/test-stack';
import { needsBackgroundBuilds } from '../support/background-builds';

const SCOPE = '123456789012';

interface Detail {
  status: string;
  rounds: SessionRound[];
  pinned_plan: PinnedPlan | null;
  state_project_id: string;
  branch: string;
}

describe('Kumoss-managed state shared by workers', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: AwsTestBed;
  let second: { worker: KumossWorker; running: Promise<void>; connection: NativeConnection } | undefined;
  const tokens: Record<string, string> = {};
  let org = '';
  const dirs: string[] = [];
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), 'kumoss-managed-e2e-'));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    const s = stack();
    db = createDb(s.databaseUrl);
    await migrate(db);
    h = await temporalHarness('managed', testActivities({ workDir: tmp() }));
    Object.assign(tokens, await roleTokens(db, 'org-managed'));
    api = await startTestApi(h, db);
    org = (
      (await api.call('GET', '/api/v1/auth/me', tokens.devops ?? '')).body.user as {
        organization_uuid: string;
      }
    ).organization_uuid;
    bed = await demoAwsBed({ state: stackManagedState(s, db), scopeId: SCOPE, organizationUuid: org });
  });
  afterAll(async () => {
    api?.close();
    if (second) {
      second.worker.shutdown();
      await second.running;
      await second.connection.close();
    }
    await bed?.destroy();
    await h?.close();
    await db?.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const settled = async (sessionId: string, rounds: number): Promise<Detail> =>
    (await waitForSession(api, tokens.developer ?? '', sessionId, rounds)) as unknown as Detail;
  const post = (path: string, body?: unknown) => postAccepted(api, tokens.devops ?? '', path, body);

  it('pins a plan on one worker, applies it on another, and a fresh checkout plans nothing', async () => {
    const s = stack();
    const key = managedStateKey('state', stateProjectId(org, bed.repoUrl, bed.iacPath, SCOPE));
    const s3 = createS3Client({ endpoint: s.s3Endpoint, bucket: s.bucket, region: 'us-east-1' });
    const stateObject = async () =>
      JSON.parse(
        await (await s3.send(new GetObjectCommand({ Bucket: s.bucket, Key: key }))).Body!.transformToString(),
      ) as { serial: number; lineage: string };
    const before = await stateObject();

    const start = await post('/api/v1/generate', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: SCOPE,
      iac_path: bed.iacPath,
      text: 'Add tag Team=platform to sg-web-demo',
    });
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(expect.objectContaining({ kind: 'generate', status: 'completed' }));
    // The session's state project id names the state the plan was made against.
    expect(d.state_project_id).toBe(stateProjectId(org, bed.repoUrl, bed.iacPath, SCOPE));
    expect(d.pinned_plan).toEqual(
      expect.objectContaining({ state_serial: before.serial, state_lineage: before.lineage }),
    );
    // The override that gave the root its backend is not on the branch.
    const check = tmp();
    await gitClient().checkout({ url: bed.repoUrl, dir: check, branch: d.branch });
    expect(
      execFileSync('git', ['ls-tree', '-r', '--name-only', 'HEAD'], { cwd: check }).toString(),
    ).not.toContain(MANAGED_BACKEND_FILE);

    // The first worker stops; a second one, with checkouts of its own, takes the session's next round.
    h.worker.shutdown();
    await expect.poll(() => h.worker.getState(), { timeout: 30_000 }).toBe('STOPPED');
    const connection = await NativeConnection.connect({ address: s.temporalAddress });
    const worker = await createWorker({
      connection,
      namespace: s.namespace,
      taskQueue: h.taskQueue,
      activities: testActivities({ workDir: tmp() }),
      workflowBundlePath: s.workflowBundlePath,
    });
    second = { worker, running: worker.run(), connection };

    const apply = await post(`/api/v1/sessions/${start.session_id}/apply`);
    const applied = await settled(start.session_id, 2);
    expect(applied.rounds[1]).toEqual(
      expect.objectContaining({ round_id: apply.round_id, kind: 'apply', status: 'completed' }),
    );
    const after = await stateObject();
    expect(after.lineage).toBe(before.lineage);
    expect(after.serial).toBeGreaterThan(before.serial);
    const sg = await awsClients(s.awsEndpoint).ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [bed.ids.get('aws_security_group.web') ?? ''] }),
    );
    expect(Object.fromEntries((sg.SecurityGroups?.[0]?.Tags ?? []).map((t) => [t.Key, t.Value]))).toEqual({
      Name: 'sg-web-demo',
      Team: 'platform',
    });

    // A checkout no worker has seen, with the same managed state: nothing left to do.
    const engine = new EngineClient({
      ...engineDeps('terraform', s.awsEndpoint),
      workdir: join(check, bed.iacPath),
      scopeId: SCOPE,
      managedState: stackManagedState(s, db),
      stateProjectId: stateProjectId(org, bed.repoUrl, bed.iacPath, SCOPE),
    });
    expect((await engine.plan({ out: join(check, 'verify.tfplan') })).hasChanges).toBe(false);
  });
});
