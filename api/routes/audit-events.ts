// Cloud audit events in, targeted detections out (issue 30). Each organization has its own
// endpoint, authenticated by its ingestion secret in a header (as an EventBridge connection with
// API-key authorization sends it) — a wrong or missing secret is 401 and nothing is recorded. An
// event that reads, failed, or is one of the organization's own runs (its role session names a
// session of this organization) is dropped; one for a resource a stack holds signals that stack's
// `stackEvents` workflow (signal-with-start: a burst is one run), one for a resource no stack holds
// is kept on the organization's unmanaged-change feed. A delivery repeated records nothing twice.
import { Router } from 'express';
import { OAuth2Client } from 'google-auth-library';
import { z } from 'zod';
import {
  auditChangeListSchema,
  auditChangeQuerySchema,
  auditSummary,
  awsAuditDeliverySchema,
  azureAuditDeliverySchema,
  eventGridValidationAnswerSchema,
  eventGridValidationCode,
  readAzureResourceEvent,
  gcpAuditSourceAnswerSchema,
  gcpAuditSourceSchema,
  pubSubPushSchema,
  readGcpAuditEntry,
  type AuditReading,
  coalesceByStack,
  eventBridgeCloudTrailSchema,
  INGESTION_SECRET_HEADER,
  ingestionAnswerSchema,
  ingestionSecretSchema,
  KUMOSS_SESSION_PREFIX,
  MAX_AUDIT_BATCH,
  readCloudTrailEvent,
  type AuditChange,
} from '../../shared/audit-events';
import { stackEventsWorkflowId } from '../../shared/ids';
import { auditChangeSignal } from '../../shared/messages';
import { stackEventsWorkflowType } from '../../shared/stack-contracts';
import {
  gcpAuditSource,
  setGcpAuditSource,
  ingestionSecretMatches,
  isOwnRunChange,
  listAuditChanges,
  recordAuditChanges,
  rotateIngestionSecret,
} from '../../shared/infra/db/audit';
import { findByCloudIds } from '../../shared/infra/db/stacks';
import { authenticate, currentUser, requireRole } from '../auth';
import { operation, route } from '../contract';
import { HttpError } from '../errors';
import type { SessionRouteDeps } from '../session-operations';
import { parseBody, uuidParam } from '../validation';

const endpoints = (organization: string) => ({
  aws: `/api/v1/audit-events/aws/${organization}`,
  azure: `/api/v1/audit-events/azure/${organization}`,
  gcp: `/api/v1/audit-events/gcp/${organization}`,
});

export const auditOperations = {
  ingestAws: operation({
    method: 'post',
    path: '/api/v1/audit-events/aws/:organization',
    summary: `CloudTrail management events as an EventBridge API destination delivers them (one event, or a batch of at most ${MAX_AUDIT_BATCH}); authenticated by the organization's ingestion secret in the \`${INGESTION_SECRET_HEADER}\` header. Starts a targeted detection of each stack whose resources changed.`,
    params: { organization: z.uuid().describe('The organization (its endpoint)') },
    body: z.union([
      eventBridgeCloudTrailSchema,
      z.array(eventBridgeCloudTrailSchema).min(1).max(MAX_AUDIT_BATCH),
    ]),
    responses: { 202: { description: 'Read; detections started', schema: ingestionAnswerSchema } },
    errors: [400, 401, 503],
  }),
  changes: operation({
    method: 'get',
    path: '/api/v1/audit-changes',
    summary:
      "The changes the organization's audit-event endpoint accepted, newest first, with the stacks and addresses they touched; `unmanaged=true`: only changes to resources no stack holds",
    query: auditChangeQuerySchema,
    responses: { 200: { description: 'The changes', schema: auditChangeListSchema } },
    errors: [400, 401, 403],
  }),
  ingestAzure: operation({
    method: 'post',
    path: '/api/v1/audit-events/azure/:organization',
    summary: `Azure Activity Log changes as an Event Grid subscription on a Resource Manager topic delivers them (Event Grid schema, at most ${MAX_AUDIT_BATCH}); the subscription's validation event is answered with its code. Authenticated by the organization's ingestion secret in the \`${INGESTION_SECRET_HEADER}\` header (an Event Grid delivery property).`,
    params: { organization: z.uuid().describe('The organization (its endpoint)') },
    body: azureAuditDeliverySchema,
    responses: {
      200: { description: 'The validation handshake answered', schema: eventGridValidationAnswerSchema },
      202: { description: 'Read; detections started', schema: ingestionAnswerSchema },
    },
    errors: [400, 401, 503],
  }),
  ingestGcp: operation({
    method: 'post',
    path: '/api/v1/audit-events/gcp/:organization',
    summary:
      "A Cloud Audit Logs entry as a Pub/Sub push subscription delivers it (a log sink's topic); authenticated by the push's OIDC token, checked against Google's certificates, the organization's configured audience and service account.",
    params: { organization: z.uuid().describe('The organization (its endpoint)') },
    body: pubSubPushSchema,
    responses: { 202: { description: 'Read; detections started', schema: ingestionAnswerSchema } },
    errors: [400, 401, 503],
  }),
  setGcpSource: operation({
    method: 'put',
    path: '/api/v1/admin/audit-sources/gcp',
    summary:
      "Where the organization's GCP audit events come from (admin): the OIDC audience and service account of its Pub/Sub push subscription",
    body: gcpAuditSourceSchema,
    responses: { 200: { description: 'Set', schema: gcpAuditSourceAnswerSchema } },
    errors: [400, 401, 403],
  }),
  rotateSecret: operation({
    method: 'post',
    path: '/api/v1/admin/ingestion-secret',
    summary:
      "A new ingestion secret for the organization's audit-event endpoint (admin); shown in this answer only, the old one stops working",
    responses: { 201: { description: 'The secret and the endpoint', schema: ingestionSecretSchema } },
    errors: [401, 403],
  }),
};

export function createAuditEventsRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);

  /** 401 unless `req` carries the organization's ingestion secret. */
  const authenticateDelivery = async (organization: string, given: string | undefined) => {
    if (!(await ingestionSecretMatches(deps.db, organization, given)))
      throw new HttpError(401, 'unauthorized', `A valid ${INGESTION_SECRET_HEADER} header is required.`);
  };
  const invalid = (what: string, error: z.ZodError): HttpError => {
    const issue = error.issues[0];
    return new HttpError(
      400,
      'invalid_request',
      `Not ${what}: ${issue ? `${issue.path.join('.') || 'body'} ${issue.message}` : 'rejected'}.`,
    );
  };

  /**
   * What every cloud's delivery comes to: its readings. Drops the organization's own runs, records
   * each change once with the stacks it touched, and signals each touched stack's `stackEvents`.
   */
  async function ingest(organization: string, readings: AuditReading[]) {
    const dropped: Record<string, number> = {};
    const drop = (why: string) => (dropped[why] = (dropped[why] ?? 0) + 1);
    const changes: AuditChange[] = [];
    for (const reading of readings) {
      if ('dropped' in reading) {
        drop(reading.dropped);
        continue;
      }
      const { change } = reading;
      if (
        change.session_name?.startsWith(KUMOSS_SESSION_PREFIX) &&
        (await isOwnRunChange(deps.db, organization, change))
      ) {
        drop('kumoss_run');
        continue;
      }
      if (!changes.some((c) => c.event_id === change.event_id)) changes.push(change);
    }
    const found = await findByCloudIds(deps.db, organization, [
      ...new Set(changes.flatMap((c) => c.resource_ids)),
    ]);
    const touched = changes.map((change) => {
      const hits = found.filter((f) => change.resource_ids.includes(f.cloud_id));
      const stacks = [...new Set(hits.map((h) => h.stack_uuid))].map((stack_uuid) => ({
        stack_uuid,
        addresses: [...new Set(hits.filter((h) => h.stack_uuid === stack_uuid).map((h) => h.address))],
      }));
      return { change, stacks };
    });
    const fresh = await recordAuditChanges(deps.db, organization, touched);
    const runs = coalesceByStack(
      touched
        .filter((t) => fresh.has(t.change.event_id))
        .flatMap((t) => t.stacks.map((s) => ({ ...s, change: t.change }))),
    );
    try {
      await Promise.all(
        runs.map((r) =>
          deps.client.workflow.signalWithStart(stackEventsWorkflowType, {
            workflowId: stackEventsWorkflowId(r.stack_uuid),
            taskQueue: deps.taskQueue,
            args: [{ stack_uuid: r.stack_uuid }],
            signal: auditChangeSignal,
            signalArgs: [{ addresses: r.addresses, changes: r.changes.map(auditSummary) }],
          }),
        ),
      );
    } catch (err) {
      // Not started: forget what was recorded, so the cloud's retry of this delivery starts it.
      await deps.db
        .deleteFrom('audit_changes')
        .where('organization_uuid', '=', organization)
        .where('event_id', 'in', [...fresh])
        .execute();
      throw new HttpError(
        503,
        'temporal_unavailable',
        `The detections could not be started: ${(err as Error).message}. Nothing was recorded; deliver again.`,
      );
    }
    return {
      changes: changes.length,
      duplicates: changes.length - fresh.size,
      stacks: runs.length,
      unmanaged: touched.filter((t) => fresh.has(t.change.event_id) && t.stacks.length === 0).length,
      dropped,
    };
  }

  route(router, auditOperations.ingestAws, async (req, res) => {
    const organization = uuidParam(req.params.organization, 'Organization');
    await authenticateDelivery(organization, req.get(INGESTION_SECRET_HEADER));
    const parsed = awsAuditDeliverySchema.safeParse(req.body);
    if (!parsed.success)
      throw invalid(
        `a CloudTrail event from EventBridge (or a batch of at most ${MAX_AUDIT_BATCH})`,
        parsed.error,
      );
    res.status(202).json(await ingest(organization, parsed.data.map(readCloudTrailEvent)));
  });

  route(router, auditOperations.ingestAzure, async (req, res) => {
    const organization = uuidParam(req.params.organization, 'Organization');
    const parsed = azureAuditDeliverySchema.safeParse(req.body);
    // The handshake is answered with its code and nothing else: it records nothing and starts
    // nothing, so it needs no secret (Event Grid may send it before the delivery's headers apply).
    const code = parsed.success ? eventGridValidationCode(parsed.data) : undefined;
    if (code !== undefined) return void res.status(200).json({ validationResponse: code });
    await authenticateDelivery(organization, req.get(INGESTION_SECRET_HEADER));
    if (!parsed.success)
      throw invalid(`an array of at most ${MAX_AUDIT_BATCH} Event Grid events`, parsed.error);
    res.status(202).json(await ingest(organization, parsed.data.map(readAzureResourceEvent)));
  });

  // One client for the process: it keeps Google's certificates as long as Google says they hold.
  const google = new OAuth2Client(
    deps.googleCertsUrl ? { endpoints: { oauth2FederatedSignonPemCertsUrl: deps.googleCertsUrl } } : {},
  );
  route(router, auditOperations.ingestGcp, async (req, res) => {
    const organization = uuidParam(req.params.organization, 'Organization');
    const source = await gcpAuditSource(deps.db, organization);
    const token = /^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1];
    const refused = () =>
      new HttpError(401, 'unauthorized', 'A Pub/Sub push OIDC token for this organization is required.');
    if (!source || !token) throw refused();
    try {
      const payload = (
        await google.verifyIdToken({ idToken: token, audience: source.audience })
      ).getPayload();
      if (payload?.email !== source.service_account_email || payload.email_verified !== true) throw refused();
    } catch {
      throw refused();
    }
    const parsed = pubSubPushSchema.safeParse(req.body);
    if (!parsed.success) throw invalid('a Pub/Sub push message', parsed.error);
    res.status(202).json(await ingest(organization, [readGcpAuditEntry(parsed.data)]));
  });

  route(router, auditOperations.setGcpSource, auth, requireRole('admin'), async (req, res) => {
    const organization = currentUser(req).organization_uuid;
    const source = parseBody(gcpAuditSourceSchema, req.body);
    await setGcpAuditSource(deps.db, organization, source);
    res.json({ ...source, endpoint: endpoints(organization).gcp });
  });

  route(router, auditOperations.changes, auth, requireRole('developer'), async (req, res) => {
    const q = parseBody(auditChangeQuerySchema, { ...req.query });
    const changes = await listAuditChanges(deps.db, currentUser(req).organization_uuid, {
      limit: q.limit,
      ...(q.unmanaged ? { unmanaged: q.unmanaged === 'true' } : {}),
      ...(q.stack ? { stack_uuid: q.stack } : {}),
    });
    res.json({ changes });
  });

  route(router, auditOperations.rotateSecret, auth, requireRole('admin'), async (req, res) => {
    const organization = currentUser(req).organization_uuid;
    const secret = await rotateIngestionSecret(deps.db, organization);
    res.status(201).json({ secret, header: INGESTION_SECRET_HEADER, endpoints: endpoints(organization) });
  });
  return router;
}
