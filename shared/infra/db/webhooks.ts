// Webhook endpoints of an organization and the log of their deliveries. The secret is returned
// once, when the endpoint is made; lists never show it. The delivery activity reads it here.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { newWebhookSecret } from '../webhooks';
import type { WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookSpec } from '../../webhook-contracts';
import { RegistryError } from './runners';
import type { Db } from './index';

export type { WebhookDelivery, WebhookEndpoint };

export async function createWebhook(
  db: Db,
  organization_uuid: string,
  spec: WebhookSpec,
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const endpoint = {
    endpoint_uuid: randomUUID(),
    organization_uuid,
    url: spec.url,
    events: [...new Set(spec.events)],
  };
  const secret = newWebhookSecret();
  await db
    .insertInto('webhook_endpoints')
    .values({ ...endpoint, events: JSON.stringify(endpoint.events), secret })
    .execute();
  return { endpoint, secret };
}

const columns = ['endpoint_uuid', 'organization_uuid', 'url', 'events'] as const;

export async function listWebhooks(db: Db, organization_uuid: string): Promise<WebhookEndpoint[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select(columns)
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => ({ ...r, events: r.events as WebhookEvent[] }));
}

/** One endpoint of the organization (never its secret), or undefined. */
export async function getWebhook(
  db: Db,
  organization_uuid: string,
  endpoint_uuid: string,
): Promise<WebhookEndpoint | undefined> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .select(columns)
    .where('organization_uuid', '=', organization_uuid)
    .where('endpoint_uuid', '=', endpoint_uuid)
    .executeTakeFirst();
  return row ? { ...row, events: row.events as WebhookEvent[] } : undefined;
}

export async function deleteWebhook(db: Db, organization_uuid: string, endpoint_uuid: string): Promise<void> {
  const r = await db
    .deleteFrom('webhook_endpoints')
    .where('endpoint_uuid', '=', endpoint_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (Number(r.numDeletedRows) === 0)
    throw new RegistryError('not_found', `Webhook ${endpoint_uuid} not found.`);
}

/** The endpoints subscribed to `event`, with their secrets (the delivery activity only). */
export async function subscribedEndpoints(
  db: Db,
  organization_uuid: string,
  event: WebhookEvent,
): Promise<(WebhookEndpoint & { secret: string })[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select([...columns, 'secret'])
    .where('organization_uuid', '=', organization_uuid)
    .execute();
  return rows
    .map((r) => ({ ...r, events: r.events as WebhookEvent[] }))
    .filter((r) => r.events.includes(event));
}

/** The events at least one of the organization's endpoints subscribes to. */
export async function subscribedEvents(db: Db, organization_uuid: string): Promise<WebhookEvent[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select('events')
    .where('organization_uuid', '=', organization_uuid)
    .execute();
  return [...new Set(rows.flatMap((r) => r.events as WebhookEvent[]))].sort();
}

/** One attempt, recorded; `delivered` when the endpoint answered 2xx. */
export async function recordDeliveryAttempt(
  db: Db,
  a: {
    delivery_id: string;
    endpoint_uuid: string;
    event: string;
    status_code: number | null;
    error: string | null;
  },
): Promise<void> {
  const delivered = a.status_code !== null && a.status_code >= 200 && a.status_code < 300;
  await db
    .insertInto('webhook_deliveries')
    .values({ ...a, attempts: 1, delivered_at: delivered ? (sql`now()` as never) : null })
    .onConflict((oc) =>
      oc.columns(['delivery_id', 'endpoint_uuid']).doUpdateSet({
        attempts: sql`webhook_deliveries.attempts + 1`,
        status_code: a.status_code,
        error: a.error,
        delivered_at: delivered ? (sql`now()` as never) : null,
        updated_at: sql`now()` as never,
      }),
    )
    .execute();
}

/** Whether this delivery already reached this endpoint (a retried activity skips it). */
export async function wasDelivered(db: Db, delivery_id: string, endpoint_uuid: string): Promise<boolean> {
  const r = await db
    .selectFrom('webhook_deliveries')
    .select('delivered_at')
    .where('delivery_id', '=', delivery_id)
    .where('endpoint_uuid', '=', endpoint_uuid)
    .executeTakeFirst();
  return Boolean(r?.delivered_at);
}

export async function listDeliveries(
  db: Db,
  organization_uuid: string,
  endpoint_uuid: string,
): Promise<WebhookDelivery[]> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .innerJoin('webhook_endpoints', 'webhook_endpoints.endpoint_uuid', 'webhook_deliveries.endpoint_uuid')
    .select([
      'webhook_deliveries.delivery_id',
      'webhook_deliveries.event',
      'webhook_deliveries.attempts',
      'webhook_deliveries.status_code',
      'webhook_deliveries.error',
      'webhook_deliveries.delivered_at',
    ])
    .where('webhook_endpoints.organization_uuid', '=', organization_uuid)
    .where('webhook_deliveries.endpoint_uuid', '=', endpoint_uuid)
    .orderBy('webhook_deliveries.updated_at', 'desc')
    .limit(200)
    .execute();
  return rows.map((r) => ({
    ...r,
    delivered_at: r.delivered_at ? new Date(r.delivered_at).toISOString() : null,
  }));
}
