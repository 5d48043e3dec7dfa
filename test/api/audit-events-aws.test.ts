// An audit event for a change made through the real AWS APIs (issue 30): the seed's security group
// applied into moto with kumoss/aws, a stack on it; a port opened with EC2's
// AuthorizeSecurityGroupIngress on moto, and the CloudTrail event AWS documents for that call posted
// to the organization's endpoint with the group's real id (moto keeps no audit trail). The targeted
// detection plans the group and opens its item with who, when, how and from where.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGESTION_SECRET_HEADER } from '../../shared/audit-events';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import type { DriftItem } from '../../shared/stack-contracts';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { ingressEvent, SAMPLE_ACTOR } from '../support/audit-events';
import { awsClients, createAwsTestBed, DEMO_ROOT, type AwsTestBed } from '../support/aws-test-bed';
import { needsBackgroundBuilds } from '../support/background-builds';
import { triggerStackRun } from '../support/stack-runs';
import {
  engineDeps,
  gitClient,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

describe('audit events for a change through the AWS APIs on moto', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: AwsTestBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let stackId = '';

  beforeAll(async () => {
    h = await temporalHarness('audit-aws', testActivities());
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'audit-aws');
    api = await startTestApi(h, db);
    const s = stack();
    bed = await createAwsTestBed({
      spec: DEMO_ROOT,
      gitHostUrl: s.gitHostUrl,
      git: gitClient(),
      engine: engineDeps('terraform', s.awsEndpoint),
    });
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      name: `audit-aws-${bed.suffix}`,
      repository_url: bed.repoUrl,
      iac_path: bed.iacPath,
      cloud: 'aws',
      scope_id: 'scope-test',
      // Hourly, half an hour from now: only the test's own triggers and the events run.
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
  });

  it('opens the security group’s item from the event, with its actor, within seconds', async () => {
    // The schedule's first run finds the root in sync and indexes the group's real id.
    expect(await triggerStackRun(api, h.client, tokens, stackId)).toMatchObject({
      status: 'completed',
      opened: 0,
    });
    const groupId = bed.ids.get('aws_security_group.web') ?? '';
    expect(groupId).toMatch(/^sg-[0-9a-f]+$/);
    const issued = await api.call('POST', '/api/v1/admin/ingestion-secret', tokens.admin);

    // Port 8080 opened through EC2 on moto; CloudTrail's record of that call, through EventBridge.
    await bed.inject('sg-ingress-added', awsClients(stack().awsEndpoint));
    const answer = await api.call(
      'POST',
      (issued.body.endpoints as { aws: string }).aws,
      undefined,
      ingressEvent('moto-evt-1', groupId),
      { [INGESTION_SECRET_HEADER]: issued.body.secret as string },
    );
    expect(answer.body).toEqual({ changes: 1, duplicates: 0, stacks: 1, unmanaged: 0, dropped: {} });
    await expect
      .poll(
        async () =>
          (
            (await api.call('GET', `/api/v1/drift-items?stack=${stackId}&state=open`, tokens.developer)).body
              .items as DriftItem[]
          ).filter((i) => i.address === 'aws_security_group.web'),
        { timeout: 60_000 },
      )
      .toEqual([
        expect.objectContaining({
          attribute: expect.stringMatching(/^ingress/) as unknown,
          audit: {
            event_id: 'moto-evt-1',
            actor: SAMPLE_ACTOR,
            at: '2026-12-04T09:12:41Z',
            action: 'ec2:AuthorizeSecurityGroupIngress',
            source_address: '203.0.113.24',
          },
        }),
      ]);
  });
});
