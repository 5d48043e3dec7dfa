// Cloud audit events on the real stack (issue 30): CloudTrail management events as EventBridge
// delivers them (a recorded-shape sample: AuthorizeSecurityGroupIngress), posted to the
// organization's endpoint with its ingestion secret, start a targeted detection of exactly the
// resources they touched; the item it opens says who, when, how and from where. The endpoint
// refuses a wrong secret and another organization's, drops reads and the organization's own runs
// (but not a session merely named like one), keeps unknown resources on the unmanaged feed, and
// records a repeated delivery once. The drift test bed's REST "cloud" stands in for AWS here:
// moto records no audit trail, so the event is posted as AWS documents it, with the bed's id.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { INGESTION_SECRET_HEADER } from '../../shared/audit-events';
import { ingressEvent, SAMPLE_ACTOR } from '../support/audit-events';
import { startGoogleCerts, type GoogleCerts } from '../support/google-oidc';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { createCloudConnection } from '../../shared/infra/db/runners';
import { triggerStackRun, type StackRun } from '../support/stack-runs';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import { newTestBed, stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

const event = ingressEvent;
const ACTOR = SAMPLE_ACTOR;

interface Item {
  address: string;
  attribute: string;
  state: string;
  audit: { event_id: string; actor: string; at: string; action: string; source_address: string } | null;
}

describe('audit events: targeted detection with the actor', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let other: Record<'developer' | 'devops' | 'admin', string>;
  let org = '';
  let secret = '';
  let stackId = '';
  let google: GoogleCerts;
  // The organization's webhook receiver: the deliveries whose signature checks out.
  let receiver: WebhookReceiver;
  let hookSecret = '';

  beforeAll(async () => {
    h = await temporalHarness('audit-events', testActivities());
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'audit');
    other = await roleTokens(db, 'audit-other');
    google = await startGoogleCerts();
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      googleCertsUrl: google.certsUrl,
    });
    bed = await newTestBed();
    receiver = await startWebhookReceiver({ secret: () => hookSecret });
  });
  afterAll(async () => {
    api?.close();
    google?.close();
    receiver?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
  });

  /** A delivery to a cloud's endpoint of `organization`, with `headers` (none: unauthenticated). */
  const deliver = (cloud: 'aws' | 'azure' | 'gcp', organization: string, body: unknown, headers = {}) =>
    api.call('POST', `/api/v1/audit-events/${cloud}/${organization}`, undefined, body, headers);
  const withSecret = (key: string | null) => (key === null ? {} : { [INGESTION_SECRET_HEADER]: key });
  const post = (body: unknown, key: string | null = secret, organization = org) =>
    deliver('aws', organization, body, withSecret(key));
  const items = async () =>
    (await api.call('GET', `/api/v1/drift-items?stack=${stackId}`, tokens.developer)).body.items as Item[];
  const runs = async () =>
    (await api.call('GET', `/api/v1/stacks/${stackId}/runs`, tokens.developer)).body.runs as StackRun[];
  const changes = async (query = '') =>
    (await api.call('GET', `/api/v1/audit-changes${query}`, tokens.developer)).body.changes as {
      event_id: string;
      stacks: { stack_uuid: string; addresses: string[] }[];
    }[];

  it('issues the secret to admins only, shown once, with the endpoint', async () => {
    expect((await api.call('POST', '/api/v1/admin/ingestion-secret', tokens.devops)).status).toBe(403);
    const issued = await api.call('POST', '/api/v1/admin/ingestion-secret', tokens.admin);
    expect(issued.status).toBe(201);
    secret = issued.body.secret as string;
    expect(secret).toMatch(/^kis_/);
    expect(issued.body.header).toBe(INGESTION_SECRET_HEADER);
    const endpoint = (issued.body.endpoints as { aws: string }).aws;
    org = endpoint.split('/').pop() as string;
    expect(org).toMatch(/^[0-9a-f-]{36}$/);
    // The other organization has its own secret, which opens only its own endpoint.
    expect((await api.call('POST', '/api/v1/admin/ingestion-secret', other.admin)).status).toBe(201);
  });

  it('refuses a missing, wrong or rotated secret and another organization’s, recording nothing', async () => {
    const e = event('refused-1', 'sg-web-demo');
    expect((await post(e, null)).status).toBe(401);
    expect((await post(e, 'kis_wrong')).status).toBe(401);
    const theirs = (await api.call('POST', '/api/v1/admin/ingestion-secret', other.admin)).body
      .secret as string;
    expect((await post(e, theirs)).status).toBe(401);
    // Another organization's endpoint with this organization's secret.
    const otherOrg = (
      (await api.call('POST', '/api/v1/admin/ingestion-secret', other.admin)).body.endpoints as {
        aws: string;
      }
    ).aws
      .split('/')
      .pop() as string;
    expect((await post(e, secret, otherOrg)).status).toBe(401);
    expect((await post(e, secret, 'not-a-uuid')).status).toBe(404);
    expect(await changes()).toEqual([]);
    // Bad bodies: 400, nothing recorded.
    for (const bad of [
      {},
      [],
      { ...e, 'detail-type': 'EC2 Instance State-change Notification' },
      Array(101).fill(e),
    ])
      expect((await post(bad)).status, JSON.stringify(bad).slice(0, 80)).toBe(400);
    expect(await changes()).toEqual([]);
  });

  it('opens the item of the change an event names, with who, when, how and where; leaves other items to the schedule', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      name: `audit-${Date.now()}`,
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'audit-scope',
      schedule: { cron: `${(new Date().getUTCMinutes() + 30) % 60} * * * *`, jitter_seconds: 30 },
    });
    expect(created.status).toBe(201);
    stackId = created.body.stack_uuid as string;
    // The schedule's run indexes the state's cloud ids, then finds a drift nobody announced.
    expect(await triggerStackRun(api, h.client, tokens, stackId)).toMatchObject({
      status: 'completed',
      opened: 0,
    });
    await bed.inject('attribute');
    expect(await triggerStackRun(api, h.client, tokens, stackId)).toMatchObject({
      status: 'completed',
      opened: 1,
    });
    expect((await items()).map((i) => [i.address, i.audit])).toEqual([[DRIFT_ADDRESSES.attribute, null]]);

    const hook = await api.call('POST', '/api/v1/webhooks', tokens.devops, {
      url: receiver.url,
      events: ['drift.detected'],
    });
    expect(hook.status).toBe(201);
    hookSecret = hook.body.secret as string;
    // Someone opens port 8080 on the security group; CloudTrail says so through EventBridge.
    await bed.inject('ingress');
    const answer = await post(event('evt-ingress-1', 'sg-web-demo'));
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({ changes: 1, duplicates: 0, stacks: 1, unmanaged: 0, dropped: {} });
    await expect
      .poll(async () => (await items()).find((i) => i.address === DRIFT_ADDRESSES.ingress), {
        timeout: 60_000,
      })
      .toMatchObject({
        state: 'open',
        audit: {
          event_id: 'evt-ingress-1',
          actor: ACTOR,
          at: '2026-12-04T09:12:41Z',
          action: 'ec2:AuthorizeSecurityGroupIngress',
          source_address: '203.0.113.24',
        },
      });
    // The webhook says who, when, how and from where, beside the item it opened.
    await expect
      .poll(() => receiver.received.find((d) => d.event === 'drift.detected' && d.body.data.audit), {
        timeout: 30_000,
      })
      .toMatchObject({
        body: {
          data: {
            items: [expect.objectContaining({ address: DRIFT_ADDRESSES.ingress })],
            audit: { event_id: 'evt-ingress-1', actor: ACTOR, action: 'ec2:AuthorizeSecurityGroupIngress' },
          },
        },
      });
    const latest = (await runs())[0] as StackRun;
    expect(latest.run_id).toMatch(new RegExp(`^drift-events:${stackId}:1:evt-ingress-1`));
    await expect.poll(async () => ((await runs())[0] as StackRun).status).toBe('completed');
    // The targeted run planned only the security group: the attribute's item stays open, unannounced.
    const after = await items();
    expect(after.find((i) => i.address === DRIFT_ADDRESSES.attribute)).toMatchObject({
      state: 'open',
      audit: null,
    });
    expect(await changes()).toEqual([
      expect.objectContaining({
        event_id: 'evt-ingress-1',
        stacks: [{ stack_uuid: stackId, addresses: [DRIFT_ADDRESSES.ingress] }],
      }),
    ]);

    // The same delivery again (EventBridge retries): recorded once, no second run.
    const again = await post(event('evt-ingress-1', 'sg-web-demo'));
    expect(again.body).toMatchObject({ changes: 1, duplicates: 1, stacks: 0 });
  });

  it('drops reads and the organization’s own runs, keeps unknown resources as unmanaged changes', async () => {
    // A real session of this organization, as its run's role session would name it.
    const session = await api.call('POST', '/api/v1/drift/full', tokens.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'audit-scope',
      text: 'Reconcile everything.',
    });
    const own = `kumoss-${session.body.session_id as string}-${session.body.round_id as string}`;
    // The organization's AWS connection names the role its runs assume.
    await createCloudConnection(db, org, {
      name: `runs-${randomUUID().slice(0, 6)}`,
      provider: 'aws',
      region: 'us-east-1',
      role_arn: 'arn:aws:iam::123456789012:role/automation/kumoss-runs',
    });
    const roleArn = (name: string, role = 'kumoss-runs') =>
      `arn:aws:sts::123456789012:assumed-role/${role}/${name}`;
    const impostor = 'kumoss-s-00000000-0000-4000-8000-000000000000-r-deadbeef';
    const now = new Date().toISOString();
    const before = (await runs()).length;
    const answer = await post([
      event('evt-read', 'sg-web-demo', { eventName: 'DescribeSecurityGroups', readOnly: true }),
      event('evt-own', 'sg-web-demo', {
        userIdentity: { type: 'AssumedRole', arn: roleArn(own) },
        eventTime: now,
      }),
      event('evt-failed', 'sg-web-demo', { errorCode: 'UnauthorizedOperation' }),
      event('evt-unknown', 'sg-0123456789abcdef0'),
    ]);
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({
      changes: 1,
      duplicates: 0,
      stacks: 0,
      unmanaged: 1,
      dropped: { read_only: 1, kumoss_run: 1, failed_call: 1 },
    });
    expect((await changes('?unmanaged=true')).map((c) => c.event_id)).toEqual(['evt-unknown']);
    // A session merely named like a run of ours is someone else's change: it runs a detection. So
    // is a real run's name on another role (an insider's PowerUser session named after the round),
    // and the run's own role session outside the round's time.
    const spoofed = await post([
      event('evt-impostor', 'sg-web-demo', {
        userIdentity: { type: 'AssumedRole', arn: roleArn(impostor) },
        eventTime: now,
      }),
      event('evt-insider', 'sg-web-demo', {
        userIdentity: { type: 'AssumedRole', arn: roleArn(own, 'PowerUser') },
        eventTime: now,
      }),
      event('evt-before', 'sg-web-demo', {
        userIdentity: { type: 'AssumedRole', arn: roleArn(own) },
        eventTime: new Date(Date.now() - 60 * 60 * 1000).toISOString(),
      }),
    ]);
    expect(spoofed.body).toMatchObject({ changes: 3, stacks: 1, dropped: {} });
    await expect.poll(async () => (await runs()).length, { timeout: 60_000 }).toBe(before + 1);
    // Another organization's feed holds none of it.
    expect((await api.call('GET', '/api/v1/audit-changes', other.developer)).body.changes).toEqual([]);
  });

  it('answers Event Grid’s handshake; takes Azure Activity Log changes only with the secret', async () => {
    const fixture = (name: string) =>
      JSON.parse(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'audit-events', name), 'utf8')) as {
        id: string;
        eventType: string;
      }[];
    const azure = (body: unknown, key: string | null = secret, organization = org) =>
      deliver('azure', organization, body, withSecret(key));
    // The handshake records nothing and starts nothing: answered for any organization, no secret.
    for (const organization of [org, '00000000-0000-4000-8000-000000000000']) {
      const hand = await azure(fixture('azure-subscription-validation.json'), null, organization);
      expect(hand.status).toBe(200);
      expect(hand.body).toEqual({ validationResponse: '512d38b6-c7b8-40c8-89fe-f46f9e9622b6' });
    }
    const write = fixture('azure-nsg-rule-write.json');
    expect((await azure(write, null)).status).toBe(401);
    expect((await azure(write, 'kis_wrong')).status).toBe(401);
    expect((await azure({ not: 'an array' })).status).toBe(400);
    const failed = [{ ...write[0]!, id: 'az-failed', eventType: 'Microsoft.Resources.ResourceWriteFailure' }];
    const answer = await azure([...write, ...failed]);
    expect(answer.status).toBe(202);
    // No stack holds the network security group: an unmanaged change, with who did it.
    expect(answer.body).toEqual({
      changes: 1,
      duplicates: 0,
      stacks: 0,
      unmanaged: 1,
      dropped: { failed_call: 1 },
    });
    expect((await changes('?unmanaged=true'))[0]).toMatchObject({
      event_id: write[0]!.id,
      cloud: 'azure',
      actor: 'bob@example.com',
      action: 'azure:Microsoft.Network/networkSecurityGroups/securityRules/write',
      source_address: '198.51.100.7',
    });
  });

  it('takes Cloud Audit Logs from Pub/Sub push only with a token Google signed for the configured audience and account', async () => {
    const audience = `https://kumoss.example.com/api/v1/audit-events/gcp/${org}`;
    const account = 'audit-push@example-project.iam.gserviceaccount.com';
    expect(
      (
        await api.call('PUT', '/api/v1/admin/audit-sources/gcp', tokens.devops, {
          audience,
          service_account_email: account,
        })
      ).status,
    ).toBe(403);
    const set = await api.call('PUT', '/api/v1/admin/audit-sources/gcp', tokens.admin, {
      audience,
      service_account_email: account,
    });
    expect(set.status).toBe(200);
    expect(set.body.endpoint).toBe(`/api/v1/audit-events/gcp/${org}`);
    const entry = {
      insertId: 'gcp-fw-1',
      logName: 'projects/example-project/logs/cloudaudit.googleapis.com%2Factivity',
      timestamp: '2026-12-04T11:20:05.123Z',
      protoPayload: {
        '@type': 'type.googleapis.com/google.cloud.audit.AuditLog',
        serviceName: 'compute.googleapis.com',
        methodName: 'v1.compute.firewalls.patch',
        resourceName: 'projects/example-project/global/firewalls/fw-web',
        authenticationInfo: { principalEmail: 'carol@example.com' },
        requestMetadata: { callerIp: '192.0.2.44' },
      },
    };
    const push = (e: unknown) => ({
      message: { data: Buffer.from(JSON.stringify(e)).toString('base64'), messageId: '9876543210' },
      subscription: 'projects/example-project/subscriptions/kumoss-audit',
    });
    const gcp = (body: unknown, token: string | null, organization = org) =>
      deliver('gcp', organization, body, token === null ? {} : { authorization: `Bearer ${token}` });
    const good = { aud: audience, email: account, email_verified: true };
    for (const [why, token] of [
      ['no token', null],
      ['another audience', google.token({ ...good, aud: 'https://elsewhere.example.com/' })],
      [
        'another account',
        google.token({ ...good, email: 'mallory@example-project.iam.gserviceaccount.com' }),
      ],
      ['an unverified email', google.token({ ...good, email_verified: false })],
      ['expired', google.token(good, { expiresIn: -3600 })],
      ['signed by another key', google.token(good, { foreignKey: true })],
      ['a secret instead', secret],
    ] as const)
      expect((await gcp(push(entry), token)).status, why).toBe(401);
    // Another organization has no GCP source: its endpoint refuses the same token.
    const theirs = (
      (await api.call('POST', '/api/v1/admin/ingestion-secret', other.admin)).body.endpoints as {
        gcp: string;
      }
    ).gcp
      .split('/')
      .pop() as string;
    expect((await gcp(push(entry), google.token(good), theirs)).status).toBe(401);
    expect((await gcp({ message: {} }, google.token(good))).status).toBe(400);

    const answer = await gcp(push(entry), google.token(good));
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({ changes: 1, duplicates: 0, stacks: 0, unmanaged: 1, dropped: {} });
    expect((await changes('?unmanaged=true'))[0]).toMatchObject({
      event_id: 'gcp-fw-1',
      cloud: 'gcp',
      actor: 'carol@example.com',
      action: 'compute:v1.compute.firewalls.patch',
      source_address: '192.0.2.44',
      resource_ids: [
        'projects/example-project/global/firewalls/fw-web',
        'https://www.googleapis.com/compute/v1/projects/example-project/global/firewalls/fw-web',
      ],
    });
    const dataAccess = {
      ...entry,
      insertId: 'gcp-read',
      logName: entry.logName.replace('activity', 'data_access'),
    };
    expect((await gcp(push(dataAccess), google.token(good))).body).toMatchObject({
      dropped: { read_only: 1 },
    });
  });

  it('a burst of events on one stack is one targeted run', async () => {
    await expect
      .poll(async () => ((await runs())[0] as StackRun).status, { timeout: 60_000 })
      .toBe('completed');
    const before = (await runs()).length;
    const burst = Array.from({ length: 20 }, (_, i) => event(`evt-burst-${i}`, 'sg-web-demo'));
    for (const slice of [burst.slice(0, 10), burst.slice(10)]) expect((await post(slice)).status).toBe(202);
    await expect.poll(async () => (await runs()).length, { timeout: 60_000 }).toBe(before + 1);
    await expect
      .poll(async () => ((await runs())[0] as StackRun).status, { timeout: 60_000 })
      .toBe('completed');
    expect((await runs()).length).toBe(before + 1);
  });
});
