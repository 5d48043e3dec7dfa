import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  assumedRoleSession,
  awsAuditDeliverySchema,
  azureAuditDeliverySchema,
  cloudIdsOfState,
  eventGridValidationCode,
  gcpIds,
  pubSubPushSchema,
  readAzureResourceEvent,
  readGcpAuditEntry,
  coalesceByStack,
  readCloudTrailEvent,
  touchedAddresses,
  type AuditChange,
} from '../../shared/audit-events';

// CloudTrail records as an EventBridge rule delivers them to an API destination, in the shape AWS
// documents for each call (test/fixtures/audit-events/).
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(join(__dirname, '../fixtures/audit-events', name), 'utf8'));

const changeOf = (r: ReturnType<typeof readCloudTrailEvent>): AuditChange => {
  if (!('change' in r)) throw new Error(`dropped: ${r.dropped}`);
  return r.change;
};

describe('CloudTrail events over EventBridge', () => {
  it('reads a console change to a security group: the group, who, when, how and from where', () => {
    const [event] = awsAuditDeliverySchema.parse(fixture('aws-authorize-security-group-ingress.json'));
    expect(changeOf(readCloudTrailEvent(event!))).toEqual({
      cloud: 'aws',
      event_id: 'b8a3f2d1-0c9e-4a7b-9d6e-5f4c3b2a1908',
      actor: 'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0a1b2c3d4e5f6a7b/alice@example.com',
      time: '2026-12-04T09:12:41Z',
      action: 'ec2:AuthorizeSecurityGroupIngress',
      source_address: '203.0.113.24',
      resource_ids: ['sg-0a1b2c3d4e5f60718'],
      session_name: 'alice@example.com',
    });
  });

  it('reads a batch: tags on an instance, bucket tagging, a role; drops the failed call and the read', () => {
    const events = awsAuditDeliverySchema.parse(fixture('aws-batch.json'));
    const read = events.map(readCloudTrailEvent);
    expect(read.map((r) => ('change' in r ? r.change.resource_ids : r.dropped))).toEqual([
      ['i-0123456789abcdef0'],
      ['acme-app-logs'],
      ['app-runtime'],
      'failed_call',
      'read_only',
    ]);
    expect(changeOf(read[0]!).actor).toBe('arn:aws:iam::123456789012:user/bob');
    expect(changeOf(read[1]!).action).toBe('s3:PutBucketTagging');
    // A Kumoss run's session is reported by name; whether it is one of the organization's runs is
    // the caller's to check (anyone may name a session so).
    expect(changeOf(read[2]!).session_name).toBe('kumoss-session-4d2c-round-1');
  });

  it('refuses what is not a CloudTrail API call event, and batches over the bound', () => {
    const event = fixture('aws-authorize-security-group-ingress.json') as Record<string, unknown>;
    expect(
      awsAuditDeliverySchema.safeParse({ ...event, 'detail-type': 'EC2 Instance State-change Notification' })
        .success,
    ).toBe(false);
    expect(awsAuditDeliverySchema.safeParse({ ...event, detail: undefined }).success).toBe(false);
    expect(awsAuditDeliverySchema.safeParse([]).success).toBe(false);
    expect(awsAuditDeliverySchema.safeParse(Array.from({ length: 101 }, () => event)).success).toBe(false);
    expect(awsAuditDeliverySchema.safeParse(Array.from({ length: 100 }, () => event)).success).toBe(true);
  });

  it('drops reads named by their call when readOnly is absent, data events and unknown services', () => {
    const [event] = awsAuditDeliverySchema.parse(fixture('aws-authorize-security-group-ingress.json'));
    const with_ = (d: Record<string, unknown>) => ({ ...event!, detail: { ...event!.detail, ...d } });
    expect(readCloudTrailEvent(with_({ readOnly: undefined, eventName: 'DescribeInstances' }))).toEqual({
      dropped: 'read_only',
      event_id: event!.detail.eventID,
    });
    expect(readCloudTrailEvent(with_({ managementEvent: false }))).toMatchObject({
      dropped: 'not_a_management_call',
    });
    expect(readCloudTrailEvent(with_({ eventType: 'AwsServiceEvent' }))).toMatchObject({
      dropped: 'not_a_management_call',
    });
    expect(readCloudTrailEvent(with_({ eventSource: 'kms.amazonaws.com' }))).toMatchObject({
      dropped: 'no_known_resource',
    });
  });

  it('reads the session name of an assumed role only', () => {
    expect(assumedRoleSession('arn:aws:sts::123456789012:assumed-role/r/kumoss-stack-1')).toBe(
      'kumoss-stack-1',
    );
    expect(assumedRoleSession('arn:aws:iam::123456789012:user/kumoss-x')).toBeUndefined();
    expect(assumedRoleSession('arn:aws:sts::123456789012:assumed-role/r/a/b')).toBeUndefined();
    expect(assumedRoleSession(undefined)).toBeUndefined();
  });
});

describe('from an event to the addresses of a stack', () => {
  const state = [
    {
      address: 'aws_security_group.web',
      type: 'aws_security_group',
      values: {
        id: 'sg-0a1b2c3d4e5f60718',
        arn: 'arn:aws:ec2:eu-west-1:123456789012:security-group/sg-0a1b2c3d4e5f60718',
        name: 'web',
      },
    },
    {
      address: 'aws_vpc_security_group_ingress_rule.ssh',
      type: 'aws_vpc_security_group_ingress_rule',
      values: { id: 'sgr-0f1e2d3c4b5a69788', security_group_id: 'sg-0a1b2c3d4e5f60718' },
    },
    {
      address: 'aws_s3_bucket.logs',
      type: 'aws_s3_bucket',
      values: { id: 'acme-app-logs', bucket: 'acme-app-logs', arn: 'arn:aws:s3:::acme-app-logs' },
    },
    {
      address: 'aws_s3_bucket_versioning.logs',
      type: 'aws_s3_bucket_versioning',
      values: { id: 'acme-app-logs', bucket: 'acme-app-logs' },
    },
    {
      address: 'aws_iam_role.app',
      type: 'aws_iam_role',
      values: { id: 'app-runtime', name: 'app-runtime', arn: 'arn:aws:iam::123456789012:role/app-runtime' },
    },
    {
      address: 'aws_instance.db',
      type: 'aws_instance',
      values: { id: 'i-0fedcba9876543210', tags: { Name: 'db' } },
    },
  ];
  const index = cloudIdsOfState(state);
  const change = (ids: string[], event_id = 'e', time = '2026-12-04T09:00:00Z'): AuditChange => ({
    cloud: 'aws',
    event_id,
    actor: 'arn:aws:iam::123456789012:user/bob',
    time,
    action: 'ec2:CreateTags',
    source_address: '198.51.100.7',
    resource_ids: ids,
  });

  it('finds every address a cloud id names: a group and its rules, a bucket and its configuration', () => {
    expect(touchedAddresses(change(['sg-0a1b2c3d4e5f60718']), index)).toEqual([
      'aws_security_group.web',
      'aws_vpc_security_group_ingress_rule.ssh',
    ]);
    expect(touchedAddresses(change(['acme-app-logs']), index)).toEqual([
      'aws_s3_bucket.logs',
      'aws_s3_bucket_versioning.logs',
    ]);
    expect(touchedAddresses(change(['app-runtime']), index)).toEqual(['aws_iam_role.app']);
  });

  it('finds nothing for a resource the state does not hold (an unmanaged change)', () => {
    expect(touchedAddresses(change(['i-0123456789abcdef0']), index)).toEqual([]);
  });

  it('coalesces a burst per stack: each address once, each event once, the latest first', () => {
    const a = change(['sg-0a1b2c3d4e5f60718'], 'e1', '2026-12-04T09:00:01Z');
    const b = change(['sg-0a1b2c3d4e5f60718'], 'e2', '2026-12-04T09:00:05Z');
    const groups = coalesceByStack([
      { stack_uuid: 's1', addresses: ['aws_security_group.web'], change: a },
      { stack_uuid: 's1', addresses: ['aws_security_group.web'], change: b },
      { stack_uuid: 's1', addresses: ['aws_security_group.web'], change: b },
      { stack_uuid: 's2', addresses: ['aws_s3_bucket.logs'], change: a },
    ]);
    expect(groups.map((g) => [g.stack_uuid, g.addresses, g.changes.map((c) => c.event_id)])).toEqual([
      ['s1', ['aws_security_group.web'], ['e2', 'e1']],
      ['s2', ['aws_s3_bucket.logs'], ['e1']],
    ]);
  });
});

describe('Azure Activity Log changes over Event Grid', () => {
  const delivery = azureAuditDeliverySchema.parse(fixture('azure-nsg-rule-write.json'));
  const rule =
    '/subscriptions/5f2e8a10-3c4b-4d6e-9f70-812a3b4c5d6e/resourcegroups/rg-web/providers/microsoft.network/networksecuritygroups/nsg-web/securityrules/allow-8080';
  const nsg =
    '/subscriptions/5f2e8a10-3c4b-4d6e-9f70-812a3b4c5d6e/resourcegroups/rg-web/providers/microsoft.network/networksecuritygroups/nsg-web';

  it('reads a security rule written: the rule and its group, who, when, how and from where', () => {
    expect(readAzureResourceEvent(delivery[0]!)).toEqual({
      change: {
        cloud: 'azure',
        event_id: '4b7c1d2e-8f90-4a1b-b2c3-d4e5f6a7b8c9',
        actor: 'bob@example.com',
        time: '2026-12-04T10:02:17.3419082Z',
        action: 'azure:Microsoft.Network/networkSecurityGroups/securityRules/write',
        source_address: '198.51.100.7',
        resource_ids: [rule, nsg],
      },
    });
  });

  it('answers the subscription handshake with its code, and no other delivery', () => {
    const handshake = azureAuditDeliverySchema.parse(fixture('azure-subscription-validation.json'));
    expect(eventGridValidationCode(handshake)).toBe('512d38b6-c7b8-40c8-89fe-f46f9e9622b6');
    expect(eventGridValidationCode(delivery)).toBeUndefined();
  });

  it('drops failures, reads and other event types', () => {
    const base = delivery[0]!;
    const withOp = (operationName: string) => ({ ...base, data: { ...base.data, operationName } });
    expect(
      readAzureResourceEvent({ ...base, eventType: 'Microsoft.Resources.ResourceWriteFailure' }),
    ).toMatchObject({
      dropped: 'failed_call',
    });
    expect(readAzureResourceEvent(withOp('Microsoft.Storage/storageAccounts/listKeys/action'))).toMatchObject(
      {
        dropped: 'read_only',
      },
    );
    expect(readAzureResourceEvent({ ...base, eventType: 'Microsoft.Storage.BlobCreated' })).toMatchObject({
      dropped: 'not_a_management_call',
    });
    expect(azureAuditDeliverySchema.safeParse(base).success).toBe(false);
  });

  it("finds the group whose state declares the rule inline, whatever the id's case", () => {
    const index = cloudIdsOfState([
      {
        address: 'azurerm_network_security_group.web',
        type: 'azurerm_network_security_group',
        values: {
          id: '/subscriptions/5f2e8a10-3c4b-4d6e-9f70-812a3b4c5d6e/resourceGroups/rg-web/providers/Microsoft.Network/networkSecurityGroups/nsg-web',
        },
      },
    ]);
    const read = readAzureResourceEvent(delivery[0]!);
    expect('change' in read && touchedAddresses(read.change, index)).toEqual([
      'azurerm_network_security_group.web',
    ]);
  });
});

describe('Cloud Audit Logs over Pub/Sub push', () => {
  const push = (entry: unknown) =>
    pubSubPushSchema.parse({
      message: { data: Buffer.from(JSON.stringify(entry)).toString('base64'), messageId: '1' },
      subscription: 'projects/p/subscriptions/s',
    });
  const entry = {
    insertId: 'b-1',
    logName: 'projects/p/logs/cloudaudit.googleapis.com%2Factivity',
    timestamp: '2026-12-04T11:00:00Z',
    protoPayload: {
      serviceName: 'storage.googleapis.com',
      methodName: 'storage.setIamPermissions',
      resourceName: 'projects/_/buckets/app-logs',
      authenticationInfo: { principalEmail: 'dave@example.com' },
      requestMetadata: { callerIp: '203.0.113.9' },
    },
  };

  it("reads a bucket's change by the bucket's name; a firewall by its id and self link", () => {
    expect(readGcpAuditEntry(push(entry))).toMatchObject({
      change: {
        cloud: 'gcp',
        actor: 'dave@example.com',
        resource_ids: ['projects/_/buckets/app-logs', 'app-logs'],
      },
    });
    expect(gcpIds('//compute.googleapis.com/projects/p/global/firewalls/fw')).toEqual([
      'projects/p/global/firewalls/fw',
      'https://www.googleapis.com/compute/v1/projects/p/global/firewalls/fw',
    ]);
  });

  it('drops failed calls, reads, data access and what is not an audit log', () => {
    const p = entry.protoPayload;
    expect(readGcpAuditEntry(push({ ...entry, protoPayload: { ...p, status: { code: 7 } } }))).toMatchObject({
      dropped: 'failed_call',
    });
    expect(
      readGcpAuditEntry(push({ ...entry, protoPayload: { ...p, methodName: 'storage.buckets.get' } })),
    ).toMatchObject({
      dropped: 'read_only',
    });
    expect(readGcpAuditEntry(push({ ...entry, logName: 'projects/p/logs/syslog' }))).toMatchObject({
      dropped: 'not_a_management_call',
    });
    expect(
      readGcpAuditEntry(pubSubPushSchema.parse({ message: { data: 'bm90IGpzb24=', messageId: '2' } })),
    ).toMatchObject({ dropped: 'not_a_management_call' });
  });
});
