// Cloud audit events, as the clouds deliver them, reduced to what a targeted detection needs: the
// cloud ids of the resources a call changed, and who changed them, when, how and from where.
// AWS: CloudTrail management events as an EventBridge rule delivers them to an API destination
// (`detail-type: "AWS API Call via CloudTrail"`; one event per request, or an array of them). Pure
// logic: the ingestion route authenticates and bounds the body, this module reads it.
import { z } from 'zod';

/** What a change event says, once read: the resources and the actor. */
export interface AuditChange {
  cloud: 'aws' | 'azure' | 'gcp';
  /** The cloud's id of the event (CloudTrail `eventID`): a delivery repeated is recognized. */
  event_id: string;
  /** Who: the principal (`userIdentity.arn`, else its principal id or type). */
  actor: string;
  /** When the call was made (ISO 8601). */
  time: string;
  /** How: the API call, `<service>:<operation>` (e.g. `ec2:AuthorizeSecurityGroupIngress`). */
  action: string;
  /** From where: the caller's source address (an IP, or the AWS service that called). */
  source_address: string;
  /** The cloud ids of the resources the call changed (security group ids, instance ids, bucket names, role names). */
  resource_ids: string[];
  /** The role session name when the actor is an assumed role (a Kumoss run's is `kumoss-…`). */
  session_name?: string;
}

/** Why an event starts nothing. */
export type AuditDrop =
  'read_only' | 'failed_call' | 'not_a_management_call' | 'no_known_resource' | 'kumoss_run';

export type AuditReading = { change: AuditChange } | { dropped: AuditDrop; event_id: string };

const MAX_TEXT = 2048;
const text = z.string().max(MAX_TEXT);

/** The CloudTrail record inside the EventBridge event (`detail`): the fields Kumoss reads. */
const cloudTrailDetailSchema = z
  .object({
    eventID: text,
    eventTime: text,
    eventSource: text,
    eventName: text,
    eventType: text.optional(),
    readOnly: z.boolean().optional(),
    managementEvent: z.boolean().optional(),
    errorCode: text.optional(),
    sourceIPAddress: text.optional(),
    userIdentity: z
      .object({
        type: text.optional(),
        arn: text.optional(),
        principalId: text.optional(),
        invokedBy: text.optional(),
      })
      .passthrough()
      .optional(),
    requestParameters: z.record(z.string(), z.unknown()).nullable().optional(),
    responseElements: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .passthrough();

export const CLOUDTRAIL_DETAIL_TYPE = 'AWS API Call via CloudTrail';

/** One EventBridge event carrying a CloudTrail record. */
export const eventBridgeCloudTrailSchema = z
  .object({
    'detail-type': z.literal(CLOUDTRAIL_DETAIL_TYPE),
    source: text,
    account: text.optional(),
    region: text.optional(),
    time: text.optional(),
    detail: cloudTrailDetailSchema,
  })
  .passthrough();
export type EventBridgeCloudTrail = z.infer<typeof eventBridgeCloudTrailSchema>;

/** At most this many events in one delivery. */
export const MAX_AUDIT_BATCH = 100;

/** A delivery: one event, or a batch of them (an API destination's batched target). */
export const awsAuditDeliverySchema = z.union([
  eventBridgeCloudTrailSchema.transform((e) => [e]),
  z.array(eventBridgeCloudTrailSchema).min(1).max(MAX_AUDIT_BATCH),
]);

/** Calls that read only, by name, for records without `readOnly`. */
const READ_ONLY_CALL = /^(Describe|Get|List|Head|Lookup|Search|Check|Validate|Preview)/;

type Json = unknown;

/** Values at `path` in `obj` (`*` walks an array; `items` arrays are CloudTrail's lists). */
function at(obj: Json, path: string[]): Json[] {
  if (path.length === 0) return [obj];
  const [head, ...rest] = path;
  if (head === '*') return Array.isArray(obj) ? obj.flatMap((o) => at(o, rest)) : [];
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return [];
  return at((obj as Record<string, Json>)[head!], rest);
}

const ids = (obj: Json, ...paths: string[]): string[] =>
  paths
    .flatMap((p) => at(obj, p.split('.')))
    .filter((v): v is string => typeof v === 'string' && v.length > 0 && v.length <= 512);

/**
 * Where each mutating call names the resources it changed, by service: EC2 security groups and
 * their rules, instances and tags; S3 bucket tagging, versioning and the rest of a bucket's
 * configuration; IAM roles and their policies. A call not listed names its resources by the usual
 * fields, or none Kumoss knows.
 */
function resourceIds(service: string, name: string, req: Json, res: Json): string[] {
  switch (service) {
    case 'ec2.amazonaws.com':
      if (name === 'CreateTags' || name === 'DeleteTags') return ids(req, 'resourcesSet.items.*.resourceId');
      if (name === 'RunInstances') return ids(res, 'instancesSet.items.*.instanceId');
      if (name === 'CreateSecurityGroup') return ids(res, 'groupId');
      if (name === 'ModifySecurityGroupRules')
        return ids(req, 'ModifySecurityGroupRulesRequest.GroupId', 'groupId');
      return ids(
        req,
        'groupId',
        'instanceId',
        'instancesSet.items.*.instanceId',
        'resourceId',
        'vpcId',
        'subnetId',
      );
    case 's3.amazonaws.com':
      return ids(req, 'bucketName');
    case 'iam.amazonaws.com':
      return ids(req, 'roleName', 'userName', 'policyArn', 'instanceProfileName');
    default:
      return [];
  }
}

/** The session name of an assumed role's ARN (`arn:aws:sts::<account>:assumed-role/<role>/<session>`). */
export function assumedRoleSession(arn: string | undefined): string | undefined {
  const m = /^arn:aws[a-z-]*:sts::\d{12}:assumed-role\/[^/]+\/([\w+=,.@-]{2,64})$/.exec(arn ?? '');
  return m?.[1];
}

/**
 * Reads one CloudTrail event: the change it made, or why it starts nothing — a read, a call that
 * failed, not a management API call, or no resource Kumoss reads ids of. Whether a `kumoss-…`
 * session is really one of the organization's runs is for the caller to check (anyone may name a
 * session so); this only reports the name.
 */
export function readCloudTrailEvent(e: EventBridgeCloudTrail): AuditReading {
  const d = e.detail;
  const event_id = d.eventID;
  if (d.eventType !== undefined && d.eventType !== 'AwsApiCall' && d.eventType !== 'AwsConsoleAction')
    return { dropped: 'not_a_management_call', event_id };
  if (d.managementEvent === false) return { dropped: 'not_a_management_call', event_id };
  if (d.readOnly === true || (d.readOnly === undefined && READ_ONLY_CALL.test(d.eventName)))
    return { dropped: 'read_only', event_id };
  if (d.errorCode) return { dropped: 'failed_call', event_id };
  const resource_ids = [
    ...new Set(resourceIds(d.eventSource, d.eventName, d.requestParameters, d.responseElements)),
  ];
  if (resource_ids.length === 0) return { dropped: 'no_known_resource', event_id };
  const who = d.userIdentity ?? {};
  const session_name = assumedRoleSession(who.arn);
  return {
    change: {
      cloud: 'aws',
      event_id,
      actor: who.arn ?? who.principalId ?? who.invokedBy ?? who.type ?? 'unknown',
      time: d.eventTime,
      action: `${d.eventSource.replace(/\.amazonaws\.com$/, '')}:${d.eventName}`,
      source_address: d.sourceIPAddress ?? 'unknown',
      resource_ids,
      ...(session_name ? { session_name } : {}),
    },
  };
}

/** How a Kumoss run's role session name begins (`roleSessionName` in activities/cloud-credentials.ts). */
export const KUMOSS_SESSION_PREFIX = 'kumoss-';

/** A state resource, as `show -json` gives it: its address, type and attribute values. */
export interface StateResource {
  address: string;
  type: string;
  values: Record<string, unknown>;
}

/** The fields of a resource's values that `cloudIdsOfState` reads. */
export const CLOUD_ID_FIELDS = ['id', 'arn', 'bucket', 'name', 'role', 'security_group_id'] as const;

/**
 * The cloud ids by which audit events name each resource of a state: `id`, `arn`, and the fields
 * some types are named by in the calls that change them (an S3 bucket's `bucket`, an IAM role's
 * `name`, a rule's security group). Returns id → the addresses it names.
 */
export function cloudIdsOfState(resources: StateResource[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (id: unknown, address: string) => {
    if (typeof id !== 'string' || id.length === 0 || id.length > 512) return;
    const list = out.get(id) ?? [];
    if (!list.includes(address)) list.push(address);
    out.set(id, list);
  };
  for (const r of resources) {
    const v = r.values;
    add(typeof v.id === 'string' && ARM_ID.test(v.id) ? v.id.toLowerCase() : v.id, r.address);
    add(v.arn, r.address);
    if (r.type.startsWith('aws_s3_bucket')) add(v.bucket, r.address);
    if (r.type === 'aws_iam_role' || r.type.startsWith('aws_iam_role_')) add(v.name ?? v.role, r.address);
    if (r.type.startsWith('aws_vpc_security_group_') || r.type === 'aws_security_group_rule')
      add(v.security_group_id, r.address);
  }
  return out;
}

/** An Azure Resource Manager id (`/subscriptions/…`): compared without case, as ARM does. */
const ARM_ID = /^\/subscriptions\/[^/]+\//i;

/**
 * An ARM resource id and the resources it sits in, lowercased: a security rule's id also names its
 * network security group (a rule may be declared inline in the group's resource).
 */
export function armIds(uri: string): string[] {
  if (!ARM_ID.test(uri) || uri.length > 1024) return [];
  const parts = uri.toLowerCase().replace(/\/+$/, '').split('/');
  const at = parts.indexOf('providers');
  if (at < 0) return [parts.join('/')];
  const out: string[] = [];
  // `/providers/<namespace>/<type>/<name>` then `/<type>/<name>` pairs.
  for (let end = parts.length; end >= at + 4; end -= 2) out.push(parts.slice(0, end).join('/'));
  return out;
}

/** Event Grid's handshake event: answered with its code (it records nothing, starts nothing). */
export const EVENT_GRID_VALIDATION = 'Microsoft.EventGrid.SubscriptionValidationEvent';

/** One Event Grid event (the Event Grid schema), as an Azure Resource Manager system topic sends it. */
export const eventGridEventSchema = z
  .object({
    id: text,
    eventType: text,
    subject: text.optional(),
    eventTime: text,
    topic: text.optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    dataVersion: text.optional(),
    metadataVersion: text.optional(),
  })
  .passthrough();
export type EventGridEvent = z.infer<typeof eventGridEventSchema>;

/** A delivery: Event Grid always sends an array. */
export const azureAuditDeliverySchema = z.array(eventGridEventSchema).min(1).max(MAX_AUDIT_BATCH);

/** The handshake's answer, as Event Grid expects it. */
export const eventGridValidationAnswerSchema = z.object({ validationResponse: z.string() });

/** The validation code of a handshake delivery, or undefined when it is not one. */
export function eventGridValidationCode(events: EventGridEvent[]): string | undefined {
  const v = events.find((e) => e.eventType === EVENT_GRID_VALIDATION);
  const code = v?.data?.validationCode;
  return typeof code === 'string' && code.length > 0 && code.length <= 256 ? code : undefined;
}

const RESOURCE_EVENT = /^Microsoft\.Resources\.Resource(Write|Delete|Action)(Success|Failure|Cancel)$/;
/** Operations that read (a `…/read` or a `list…/action`). */
const ARM_READ = /\/read$|\/list[^/]*\/action$/i;

/**
 * An Azure Activity Log change as Event Grid delivers it from a subscription's or resource group's
 * Resource Manager topic (`Microsoft.Resources.ResourceWriteSuccess` and its kin): who (the
 * caller's UPN, name or application id in `claims`), when, how (`operationName`), from where
 * (`httpRequest.clientIpAddress`) and the ARM ids it touched. Failed and cancelled operations,
 * reads and every other event type are dropped.
 */
export function readAzureResourceEvent(e: EventGridEvent): AuditReading {
  const event_id = e.id;
  const m = RESOURCE_EVENT.exec(e.eventType);
  if (!m) return { dropped: 'not_a_management_call', event_id };
  if (m[2] !== 'Success') return { dropped: 'failed_call', event_id };
  const d = e.data ?? {};
  const operation = typeof d.operationName === 'string' ? d.operationName.slice(0, 512) : '';
  if (ARM_READ.test(operation)) return { dropped: 'read_only', event_id };
  const uri = typeof d.resourceUri === 'string' ? d.resourceUri : (e.subject ?? '');
  const resource_ids = armIds(uri);
  if (resource_ids.length === 0) return { dropped: 'no_known_resource', event_id };
  const claims = (d.claims && typeof d.claims === 'object' ? d.claims : {}) as Record<string, unknown>;
  const claim = (...names: string[]) =>
    names.map((n) => claims[n]).find((v): v is string => typeof v === 'string' && v.length > 0);
  const http = (d.httpRequest && typeof d.httpRequest === 'object' ? d.httpRequest : {}) as Record<
    string,
    unknown
  >;
  return {
    change: {
      cloud: 'azure',
      event_id,
      actor:
        claim(
          'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn',
          'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name',
          'name',
          'appid',
          'http://schemas.microsoft.com/identity/claims/objectidentifier',
        )?.slice(0, MAX_TEXT) ?? 'unknown',
      time: e.eventTime,
      action: `azure:${operation || e.eventType}`,
      source_address:
        typeof http.clientIpAddress === 'string' ? http.clientIpAddress.slice(0, 256) : 'unknown',
      resource_ids,
    },
  };
}

/** A Pub/Sub push delivery: one message whose data is a Cloud Audit Logs entry (base64 JSON). */
export const pubSubPushSchema = z
  .object({
    message: z
      .object({
        data: z.string().max(1_000_000),
        messageId: text.optional(),
        message_id: text.optional(),
        publishTime: text.optional(),
        attributes: z.record(z.string(), text).optional(),
      })
      .passthrough(),
    subscription: text.optional(),
  })
  .passthrough();
export type PubSubPush = z.infer<typeof pubSubPushSchema>;

/** The Cloud Audit Logs entry (a LogEntry with an AuditLog payload): the fields Kumoss reads. */
const auditLogEntrySchema = z
  .object({
    insertId: text,
    logName: text,
    timestamp: text,
    protoPayload: z
      .object({
        serviceName: text.optional(),
        methodName: text.optional(),
        resourceName: text.optional(),
        authenticationInfo: z.object({ principalEmail: text.optional() }).passthrough().optional(),
        requestMetadata: z.object({ callerIp: text.optional() }).passthrough().optional(),
        status: z.object({ code: z.number().int().optional() }).passthrough().optional(),
        authorizationInfo: z
          .array(z.object({ permission: text.optional(), resource: text.optional() }).passthrough())
          .max(100)
          .optional(),
      })
      .passthrough(),
  })
  .passthrough();

/** Method names that read (an Admin Activity entry can still name one: `…get`, `…list`). */
const GCP_READ = /\.(get|list|aggregatedList|getIamPolicy|testIamPermissions)$/i;

/**
 * The cloud ids a GCP resource name stands for: itself (a Compute resource's state id is
 * `projects/<p>/global/firewalls/<name>`), its self link, and a bucket's own name.
 */
export function gcpIds(resourceName: string): string[] {
  const name = resourceName.replace(/^\/\/[^/]+\//, '').replace(/^\/+/, '');
  if (!/^projects\//.test(name) || name.length > 1024) return [];
  const out = [name];
  if (/^projects\/[^/]+\/(global|regions|zones)\//.test(name))
    out.push(`https://www.googleapis.com/compute/v1/${name}`);
  const bucket = /^projects\/_\/buckets\/([^/]+)/.exec(name)?.[1];
  if (bucket) out.push(bucket);
  return out;
}

/**
 * A Cloud Audit Logs entry as a log sink publishes it to Pub/Sub and a push subscription delivers
 * it: who (`authenticationInfo.principalEmail`), when, how (`<service>:<method>`), from where
 * (`requestMetadata.callerIp`) and the ids of `resourceName`. Data Access entries (reads), failed
 * calls (`status.code` ≠ 0), reading methods and entries that are not audit logs are dropped.
 */
export function readGcpAuditEntry(push: PubSubPush): AuditReading {
  const event_id = push.message.messageId ?? push.message.message_id ?? 'unknown';
  let raw: unknown;
  try {
    raw = JSON.parse(
      new TextDecoder().decode(Uint8Array.from(atob(push.message.data), (c) => c.charCodeAt(0))),
    );
  } catch {
    return { dropped: 'not_a_management_call', event_id };
  }
  const parsed = auditLogEntrySchema.safeParse(raw);
  if (!parsed.success) return { dropped: 'not_a_management_call', event_id };
  const e = parsed.data;
  const log = decodeURIComponent(e.logName.split('/logs/')[1] ?? '');
  if (log === 'cloudaudit.googleapis.com/data_access') return { dropped: 'read_only', event_id: e.insertId };
  if (log !== 'cloudaudit.googleapis.com/activity')
    return { dropped: 'not_a_management_call', event_id: e.insertId };
  const p = e.protoPayload;
  if (p.status?.code) return { dropped: 'failed_call', event_id: e.insertId };
  const method = p.methodName ?? '';
  if (GCP_READ.test(method)) return { dropped: 'read_only', event_id: e.insertId };
  const resource_ids = [
    ...new Set(
      [p.resourceName ?? '', ...(p.authorizationInfo ?? []).map((a) => a.resource ?? '')].flatMap(gcpIds),
    ),
  ];
  if (resource_ids.length === 0) return { dropped: 'no_known_resource', event_id: e.insertId };
  return {
    change: {
      cloud: 'gcp',
      event_id: e.insertId,
      actor: p.authenticationInfo?.principalEmail ?? 'unknown',
      time: e.timestamp,
      action: `${(p.serviceName ?? 'gcp').replace(/\.googleapis\.com$/, '')}:${method}`,
      source_address: p.requestMetadata?.callerIp ?? 'unknown',
      resource_ids,
    },
  };
}

/** The addresses a change touches in a state's index (cloudIdsOfState), in order, once each. */
export function touchedAddresses(change: AuditChange, index: Map<string, string[]>): string[] {
  return [...new Set(change.resource_ids.flatMap((id) => index.get(id) ?? []))];
}

/**
 * A burst coalesced: the changes of one delivery (or window) by stack, each stack's touched
 * addresses once, with the latest change's actor as the one the item shows first.
 */
export function coalesceByStack(
  hits: { stack_uuid: string; addresses: string[]; change: AuditChange }[],
): { stack_uuid: string; addresses: string[]; changes: AuditChange[] }[] {
  const by = new Map<string, { stack_uuid: string; addresses: string[]; changes: AuditChange[] }>();
  for (const h of hits) {
    const g = by.get(h.stack_uuid) ?? { stack_uuid: h.stack_uuid, addresses: [], changes: [] };
    for (const a of h.addresses) if (!g.addresses.includes(a)) g.addresses.push(a);
    if (!g.changes.some((c) => c.event_id === h.change.event_id)) g.changes.push(h.change);
    by.set(h.stack_uuid, g);
  }
  for (const g of by.values()) g.changes.sort((a, b) => b.time.localeCompare(a.time));
  return [...by.values()];
}

/** Who, when, how and from where, as an inbox item and a `drift.detected` webhook carry it. */
export const auditSummarySchema = z.object({
  event_id: z.string(),
  actor: z.string(),
  at: z.string(),
  action: z.string(),
  source_address: z.string(),
});
export type AuditSummary = z.infer<typeof auditSummarySchema>;

export function auditSummary(c: AuditChange): AuditSummary {
  return {
    event_id: c.event_id,
    actor: c.actor,
    at: c.time,
    action: c.action,
    source_address: c.source_address,
  };
}

/** A change the organization's endpoint accepted (GET /api/v1/audit-changes). */
export const auditChangeViewSchema = auditSummarySchema.extend({
  cloud: z.string(),
  resource_ids: z.array(z.string()),
  /** The stacks and addresses it touched; empty: an unmanaged change (no stack holds the resource). */
  stacks: z.array(z.object({ stack_uuid: z.string(), addresses: z.array(z.string()) })),
  received_at: z.string(),
});
export type AuditChangeView = z.infer<typeof auditChangeViewSchema>;
export const auditChangeListSchema = z.object({ changes: z.array(auditChangeViewSchema) });
export const auditChangeQuerySchema = z
  .object({
    unmanaged: z.enum(['true', 'false']).optional().describe('Only changes to resources no stack holds'),
    stack: z.uuid().optional().describe('Only changes that touched this stack'),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();

/** What the ingestion endpoint did with a delivery. */
export const ingestionAnswerSchema = z.object({
  /** Change events read from the delivery (before duplicates). */
  changes: z.number().int(),
  /** Changes seen before (a delivery repeated): recorded once, started nothing again. */
  duplicates: z.number().int(),
  /** Stacks whose targeted detection this delivery started or joined. */
  stacks: z.number().int(),
  /** Changes to resources no stack holds (the organization's unmanaged-change feed). */
  unmanaged: z.number().int(),
  /** Events dropped, by reason. */
  dropped: z.record(z.string(), z.number().int()),
});

/** A new ingestion secret: shown in this answer only. */
export const ingestionSecretSchema = z.object({
  secret: z.string(),
  /** The header an EventBridge connection (API key authorization) sends it in. */
  header: z.string(),
  endpoints: z.object({ aws: z.string(), azure: z.string(), gcp: z.string() }),
});

/** The header that carries an organization's ingestion secret. */
export const INGESTION_SECRET_HEADER = 'x-kumoss-ingestion-secret';

/** What a stack's event-driven detection is told: the addresses to plan and the changes behind them. */
export interface AuditSignal {
  addresses: string[];
  changes: AuditSummary[];
}

/** Where an organization's GCP audit events come from: its Pub/Sub push subscription's OIDC token. */
export const gcpAuditSourceSchema = z
  .object({
    /** The audience the push subscription sets on its token (by default its endpoint's URL). */
    audience: z.string().trim().min(1).max(2048),
    /** The service account the push subscription authenticates as. */
    service_account_email: z.email().max(320),
  })
  .strict();
export type GcpAuditSource = z.infer<typeof gcpAuditSourceSchema>;
export const gcpAuditSourceAnswerSchema = gcpAuditSourceSchema.extend({ endpoint: z.string() });
