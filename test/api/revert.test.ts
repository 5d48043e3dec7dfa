// Adopt or revert, with an exact blast radius (issue 27), over the real HTTP API on an AWS-shaped
// root (kumoss/aws into moto) watched by a stack: one console tag change is one inbox item that
// shows what the code declares and what the cloud has; a generate round's pinned plan changes only
// what it was asked and lists the rest of the root's pending changes beside it; a revert — from the
// inbox or a session's leftovers — is a generate round with no change to the code, targeted at
// exactly the chosen addresses, audited (a denied plan is blocked), locked and applied; the next
// run resolves what it put back, and everything else is still there.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateTagsCommand,
  DescribeInstancesCommand,
  DescribeSecurityGroupsCommand,
  ModifyInstanceAttributeCommand,
  RevokeSecurityGroupIngressCommand,
} from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complianceRefusal, type PinnedPlan, type SessionRound } from '../../shared/contracts';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { driftReportSchema } from '../../shared/drift-report';
import type { DriftItem } from '../../shared/stack-contracts';
import { postAccepted, roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import {
  AMI,
  awsClients,
  createAwsTestBed,
  PROVIDER,
  type AwsTestBed,
  type RootSpec,
} from '../support/aws-test-bed';
import {
  artifactStore,
  gitClient,
  promptsWithAwsRules,
  stack,
  engineDeps,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';
import { triggerStackRun } from '../support/stack-runs';
import { needsBackgroundBuilds } from '../support/background-builds';

interface Detail {
  status: string;
  rounds: SessionRound[];
  locked: boolean;
  pinned_plan: PinnedPlan | null;
  branch: string;
}

const ROOT: RootSpec = {
  name: 'revert',
  cases: [],
  files: (s) => ({
    'main.tf': `${PROVIDER}
resource "aws_security_group" "web" {
  name        = "web-${s}"
  description = "web tier"

  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  tags = {
    Name = "sg-web-${s}"
  }
}

resource "aws_security_group" "cache" {
  name        = "cache-${s}"
  description = "redis"
}

# Legacy: ssh from anywhere, which the compliance policies deny.
resource "aws_security_group" "admin" {
  name        = "admin-${s}"
  description = "admin access"

  ingress {
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_instance" "api" {
  ami           = "${AMI}"
  instance_type = "t3.micro"

  tags = {
    Name = "api-${s}"
  }
}

resource "aws_instance" "worker" {
  count         = 2
  ami           = "${AMI}"
  instance_type = "t3.micro"

  tags = {
    Name = "worker-${s}-\${count.index}"
    Team = "web"
  }
}
`,
  }),
};

/** Patch windows are set on instances by the patching service: left alone. */
const PATCH_RULE = [
  '  - id: aws-instance-patch-window',
  '    resource_type: aws_instance',
  '    attribute: tags.Patch',
  '    reason: The patching service sets the patch window.',
];

describe('adopt or revert, with an exact blast radius', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: AwsTestBed;
  let prompts: string;
  let stackId = '';
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  const aws = () => awsClients(stack().awsEndpoint);

  beforeAll(async () => {
    prompts = promptsWithAwsRules(PATCH_RULE);
    h = await temporalHarness('revert', testActivities({ promptsDir: prompts }));
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'org-revert');
    api = await startTestApi(h, db);
    const s = stack();
    bed = await createAwsTestBed({
      spec: ROOT,
      gitHostUrl: s.gitHostUrl,
      git: gitClient(),
      engine: engineDeps('terraform', s.awsEndpoint),
    });
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      name: `revert-${bed.suffix}`,
      repository_url: bed.repoUrl,
      iac_path: bed.iacPath,
      cloud: 'aws',
      scope_id: 'scope-test',
      // Hourly, half an hour from now: only the test's own triggers run.
      schedule: { cron: `${(new Date().getUTCMinutes() + 30) % 60} * * * *` },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    stackId = (created.body as { stack_uuid: string }).stack_uuid;
  });
  afterAll(async () => {
    if (stackId) await api?.call('DELETE', `/api/v1/stacks/${stackId}`, tokens.devops);
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    rmSync(prompts, { recursive: true, force: true });
  });

  const id = (address: string) => bed.ids.get(address) ?? '';
  const run = () => triggerStackRun(api, h.client, tokens, stackId);
  const openItems = async () =>
    (
      (await api.call('GET', `/api/v1/drift-items?stack=${stackId}&state=open`, tokens.developer)).body
        .items as DriftItem[]
    ).sort((a, b) => `${a.address}${a.attribute}`.localeCompare(`${b.address}${b.attribute}`));
  const settled = async (sessionId: string, rounds: number) =>
    (await waitForSession(api, tokens.developer, sessionId, rounds)) as unknown as Detail;
  const post = (path: string, body?: unknown) => postAccepted(api, tokens.devops, path, body);
  const ingress = async (address: string) => {
    const out = await aws().ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [id(address)] }));
    return (out.SecurityGroups?.[0]?.IpPermissions ?? []).map((p) => p.FromPort).sort();
  };
  const tags = async (address: string) => {
    const out = await aws().ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [id(address)] }));
    return Object.fromEntries(
      (out.SecurityGroups?.[0]?.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']),
    ) as Record<string, string>;
  };
  const instance = async (address: string) => {
    const out = await aws().ec2.send(new DescribeInstancesCommand({ InstanceIds: [id(address)] }));
    const i = out.Reservations?.[0]?.Instances?.[0];
    return {
      type: i?.InstanceType,
      tags: Object.fromEntries((i?.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])) as Record<
        string,
        string
      >,
    };
  };
  const open8080 = () =>
    aws().ec2.send(
      new AuthorizeSecurityGroupIngressCommand({
        GroupId: id('aws_security_group.web'),
        IpPermissions: [
          { IpProtocol: 'tcp', FromPort: 8080, ToPort: 8080, IpRanges: [{ CidrIp: '0.0.0.0/0' }] },
        ],
      }),
    );
  const resizeApi = () =>
    aws().ec2.send(
      new ModifyInstanceAttributeCommand({
        InstanceId: id('aws_instance.api'),
        InstanceType: { Value: 't3.large' },
      }),
    );

  it('one console tag change is one inbox item, with what the code declares and what the cloud has', async () => {
    await aws().ec2.send(
      new CreateTagsCommand({
        Resources: [id('aws_security_group.web')],
        Tags: [{ Key: 'Team', Value: 'ops' }],
      }),
    );
    const r = await run();
    expect(r).toEqual(expect.objectContaining({ status: 'completed', opened: 1, drift_count: 1 }));
    const items = await openItems();
    // tags_all (the provider's mirror) is folded into tags: one item, not two.
    expect(items.map((i) => [i.address, i.attribute, i.declared, i.actual, i.note])).toEqual([
      ['aws_security_group.web', 'tags.Team', null, 'ops', null],
    ]);
  });

  it('a generate round pins a plan of only what it was asked; the rest of the root is listed and never applied', async () => {
    await open8080();
    await resizeApi();
    const start = await post('/api/v1/generate', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-test',
      iac_path: bed.iacPath,
      text: 'Add tag Owner=platform to aws_security_group.cache',
    });
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(expect.objectContaining({ kind: 'generate', status: 'completed' }));
    const impact = (d.pinned_plan as PinnedPlan).impact;
    expect(impact).toEqual(
      expect.objectContaining({
        update: 1,
        create: 0,
        changes: [{ address: 'aws_security_group.cache', action: 'update' }],
        targets: ['aws_security_group.cache'],
        not_in_plan: [
          { address: 'aws_instance.api', action: 'update' },
          { address: 'aws_security_group.web', action: 'update' },
        ],
      }),
    );
    expect(d.rounds[0]?.summary).toContain(
      'Not in this plan: 2 resources would change (aws_instance.api update, aws_security_group.web update).',
    );
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    const applied = await settled(start.session_id, 2);
    expect(applied.rounds[1]).toEqual(expect.objectContaining({ kind: 'apply', status: 'completed' }));
    // Only the change reached the cloud: the console's drift is still there.
    expect(await tags('aws_security_group.cache')).toEqual({ Owner: 'platform' });
    expect(await ingress('aws_security_group.web')).toEqual([443, 8080]);
    expect((await instance('aws_instance.api')).type).toBe('t3.large');
    expect(await tags('aws_security_group.web')).toEqual(expect.objectContaining({ Team: 'ops' }));
  });

  it('reverts a console-opened rule and a resize from the inbox: the code is unchanged, the plan holds exactly those addresses, and the next run resolves them', async () => {
    await run();
    const items = await openItems();
    expect(items.map((i) => `${i.address} ${i.attribute}`)).toEqual([
      'aws_instance.api instance_type',
      'aws_security_group.web ingress',
      'aws_security_group.web tags.Team',
    ]);
    const web = items.filter((i) => i.address === 'aws_security_group.web');
    const started = await api.call('POST', '/api/v1/drift-items/revert', tokens.devops, {
      item_uuids: web.map((i) => i.drift_item_uuid),
    });
    expect(started.status).toBe(202);
    expect(started.body.addresses).toEqual(['aws_security_group.web']);
    const sessionId = started.body.session_id as string;
    const d = await settled(sessionId, 1);
    expect(d.rounds[0]).toEqual(expect.objectContaining({ kind: 'generate', status: 'completed' }));
    // The generate session's tag on cache is applied but not merged: main's code would take it
    // back — a pending change, listed beside the plan and not in it.
    expect(d.rounds[0]?.summary).toBe(
      'Revert in the cloud: aws_security_group.web back to what the code declares; the code is unchanged. Plan pinned: 0 to create, 1 to update, 0 to replace, 0 to destroy. Not in this plan: 2 resources would change (aws_instance.api update, aws_security_group.cache update). Compliance: passed.',
    );
    const pinned = d.pinned_plan as PinnedPlan;
    expect(pinned.impact.changes).toEqual([{ address: 'aws_security_group.web', action: 'update' }]);
    // No commit: the plan is of the code on main as it is.
    expect(pinned.commit).toBe((await gitClient().remoteBranches(bed.repoUrl)).get('main'));
    expect(d.locked).toBe(true);
    await post(`/api/v1/sessions/${sessionId}/apply`);
    expect((await settled(sessionId, 2)).rounds[1]).toEqual(
      expect.objectContaining({
        kind: 'apply',
        status: 'completed',
        summary: `Applied the pinned plan of round ${d.rounds[0]?.round_id}: 0 to create, 1 to update, 0 to replace, 0 to destroy. A fresh plan of aws_security_group.web shows no change.`,
      }),
    );
    expect(await ingress('aws_security_group.web')).toEqual([443]);
    expect(await tags('aws_security_group.web')).toEqual({ Name: `sg-web-${bed.suffix}` });
    expect((await instance('aws_instance.api')).type).toBe('t3.large'); // not asked: left alone

    // The resize, reverted the same way.
    const api2 = (await openItems()).find((i) => i.address === 'aws_instance.api') as DriftItem;
    const resized = await api.call('POST', '/api/v1/drift-items/revert', tokens.devops, {
      item_uuids: [api2.drift_item_uuid],
    });
    const r = await settled(resized.body.session_id as string, 1);
    expect(r.pinned_plan?.impact.changes).toEqual([{ address: 'aws_instance.api', action: 'update' }]);
    expect(r.pinned_plan?.impact.not_in_plan).toEqual([
      { address: 'aws_security_group.cache', action: 'update' },
    ]);
    await post(`/api/v1/sessions/${resized.body.session_id as string}/apply`);
    await settled(resized.body.session_id as string, 2);
    expect((await instance('aws_instance.api')).type).toBe('t3.micro');

    const after = await run();
    expect(after.resolved).toBe(3);
    expect(await openItems()).toEqual([]);
  });

  it('a revert whose plan the policies deny is blocked like a generate plan', async () => {
    // Someone closed the legacy ssh rule in the console; putting it back is what policy forbids.
    await aws().ec2.send(
      new RevokeSecurityGroupIngressCommand({
        GroupId: id('aws_security_group.admin'),
        IpPermissions: [{ IpProtocol: 'tcp', FromPort: 22, ToPort: 22, IpRanges: [{ CidrIp: '0.0.0.0/0' }] }],
      }),
    );
    await run();
    const [item] = await openItems();
    expect(item?.address).toBe('aws_security_group.admin');
    const started = await api.call('POST', '/api/v1/drift-items/revert', tokens.devops, {
      item_uuids: [item?.drift_item_uuid],
    });
    const sessionId = started.body.session_id as string;
    const d = await settled(sessionId, 1);
    const compliance = d.pinned_plan?.compliance;
    expect(compliance?.passed).toBe(false);
    expect(compliance?.deny).toEqual([
      'aws_security_group.admin: ingress from the whole internet on admin port 22',
    ]);
    await post(`/api/v1/sessions/${sessionId}/apply`);
    const refused = await settled(sessionId, 2);
    expect(refused.rounds[1]).toEqual(
      expect.objectContaining({
        kind: 'apply',
        status: 'uncompleted',
        reason: complianceRefusal(compliance?.deny ?? []),
      }),
    );
    expect(await ingress('aws_security_group.admin')).toEqual([]);
  });

  it('an exception on a tag of count instances leaves the code and the report right, and the session reverts what it left', async () => {
    for (const w of ['aws_instance.worker[0]', 'aws_instance.worker[1]'])
      await aws().ec2.send(
        new CreateTagsCommand({
          Resources: [id(w)],
          Tags: [
            { Key: 'Patch', Value: 'tuesday' },
            { Key: 'Team', Value: 'ops' },
          ],
        }),
      );
    const start = await post('/api/v1/drift/partial', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-test',
      iac_path: bed.iacPath,
      text: 'Resolve the drift on aws_instance.worker',
    });
    const d = await settled(start.session_id, 1);
    expect(d.rounds[0]).toEqual(
      expect.objectContaining({ kind: 'partial', status: 'completed', outcome: 'Succeeded' }),
    );
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(d.rounds[0]?.report_key ?? '')),
    );
    expect(report.whitelisted_exceptions).toEqual(
      ['aws_instance.worker[0]', 'aws_instance.worker[1]'].map((address) => ({
        address,
        attributes: ['tags.Patch'],
        rule_id: 'aws-instance-patch-window',
        reason: 'The patching service sets the patch window.',
      })),
    );
    expect(report.unreconciled_drift).toBeUndefined();
    // The code follows the console's Team, and never writes the patch window the rule leaves alone.
    const branchFile = await readBranchFile(d.branch);
    expect(branchFile).toContain('Team = "ops"');
    expect(branchFile).not.toContain('Patch');

    // The session's leftovers: only what its round found may be reverted.
    const wrong = await api.call('POST', `/api/v1/sessions/${start.session_id}/revert`, tokens.devops, {
      addresses: ['aws_instance.api'],
    });
    expect(wrong.status).toBe(400);
    expect((wrong.body as { error: { message: string } }).error.message).toBe(
      'addresses: aws_instance.api is not drift this session found; it found aws_instance.worker[0], aws_instance.worker[1].',
    );
    await post(`/api/v1/sessions/${start.session_id}/revert`, { addresses: ['aws_instance.worker[0]'] });
    const reverted = await settled(start.session_id, 2);
    expect(reverted.rounds[1]).toEqual(expect.objectContaining({ kind: 'generate', status: 'completed' }));
    expect(reverted.pinned_plan?.impact.changes).toEqual([
      { address: 'aws_instance.worker[0]', action: 'update' },
    ]);
    await post(`/api/v1/sessions/${start.session_id}/apply`);
    expect((await settled(start.session_id, 3)).rounds[2]).toEqual(
      expect.objectContaining({ kind: 'apply', status: 'completed' }),
    );
    // worker[0] follows the branch's code (Team ops, no patch window); worker[1] was not asked.
    expect((await instance('aws_instance.worker[0]')).tags).toEqual({
      Name: `worker-${bed.suffix}-0`,
      Team: 'ops',
    });
    expect((await instance('aws_instance.worker[1]')).tags).toEqual(
      expect.objectContaining({ Patch: 'tuesday', Team: 'ops' }),
    );
  });

  /** main.tf as the session branch has it. */
  async function readBranchFile(branch: string): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-revert-verify-'));
    try {
      await gitClient().checkout({ url: bed.repoUrl, dir, branch });
      return readFileSync(join(dir, bed.iacPath, 'main.tf'), 'utf8');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
