// Delivers one event to every endpoint of the organization subscribed to it: the body signed with
// the endpoint's secret (shared/infra/webhooks.ts), each attempt logged with its status code. An endpoint
// that answered 2xx before is skipped; any other answer fails the attempt, and Temporal retries it
// with backoff (the workflow's retry policy). The secret never leaves this activity; the log keeps
// the status code or the local error, never what the endpoint answered. A private, loopback or
// link-local endpoint the configuration does not allow is not contacted.
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../shared/infra/db';
import { recordDeliveryAttempt, subscribedEndpoints, wasDelivered } from '../shared/infra/db/webhooks';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { checkTarget, pinnedLookup, type TargetPolicy } from '../shared/infra/network-targets';
import { SIGNATURE_HEADER, signatureHeader, type WebhookEvent } from '../shared/infra/webhooks';

export interface WebhookDeliveryInput {
  organization_uuid: string;
  /** Stable across retries: `<run id>:<event>`. */
  delivery_id: string;
  event: WebhookEvent;
  data: Record<string, unknown>;
  /** When the event happened (the workflow's clock). */
  at: string;
}

/**
 * POSTs `body` to `url` and answers the status code (a redirect is an answer, never followed),
 * reading nothing of what the endpoint says; connected to `address` when given.
 */
function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
  address?: { address: string; family: 4 | 6 },
): Promise<number> {
  const target = new URL(url);
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        timeout: timeoutMs,
        ...(address ? { lookup: pinnedLookup(address) } : {}),
      },
      (res) => {
        res.resume();
        res.on('error', () => undefined);
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

export function createWebhookActivities(deps: { db: Db; timeoutMs?: number; targets?: TargetPolicy }) {
  const policy = deps.targets ?? { allowed: [] };
  return {
    async deliverWebhook(input: WebhookDeliveryInput): Promise<{ endpoints: number; delivered: number }> {
      const endpoints = await subscribedEndpoints(deps.db, input.organization_uuid, input.event);
      const body = JSON.stringify({
        id: input.delivery_id,
        event: input.event,
        at: input.at,
        data: input.data,
      });
      const failures: string[] = [];
      let delivered = 0;
      for (const ep of endpoints) {
        if (await wasDelivered(deps.db, input.delivery_id, ep.endpoint_uuid)) {
          delivered++;
          continue;
        }
        let status: number | null = null;
        let error: string | null = null;
        // Checked at every delivery, not only at registration: a name may resolve elsewhere now;
        // and the delivery goes to the address checked, not to what the name resolves to next.
        const check = await checkTarget(ep.url, policy);
        if (check.refused !== undefined) error = `refused: ${check.refused}`;
        else
          try {
            status = await post(
              ep.url,
              {
                'content-type': 'application/json',
                'user-agent': 'Kumoss-Webhooks',
                'kumoss-event': input.event,
                'kumoss-delivery': input.delivery_id,
                [SIGNATURE_HEADER]: signatureHeader(ep.secret, body),
              },
              body,
              deps.timeoutMs ?? 10_000,
              check.address,
            );
            if (status < 200 || status >= 300) error = `answered ${status}`;
          } catch (err) {
            error = (err as Error).message;
          }
        await recordDeliveryAttempt(deps.db, {
          delivery_id: input.delivery_id,
          endpoint_uuid: ep.endpoint_uuid,
          event: input.event,
          status_code: status,
          error,
        });
        if (error) failures.push(`${new URL(ep.url).origin}: ${error}`);
        else delivered++;
      }
      if (failures.length > 0)
        throw ApplicationFailure.retryable(
          `Webhook delivery failed: ${failures.join('; ')}`,
          'WebhookDeliveryFailed',
        );
      return { endpoints: endpoints.length, delivered };
    },
  };
}
