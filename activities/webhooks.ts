// Delivers one event to every endpoint of the organization subscribed to it: the body signed with
// the endpoint's secret (shared/infra/webhooks.ts), each attempt logged with its status code. An endpoint
// that answered 2xx before is skipped; any other answer fails the attempt, and Temporal retries it
// with backoff (the workflow's retry policy). The secret never leaves this activity; the log keeps
// the status code or the local error, never what the endpoint answered. A private, loopback or
// link-local endpoint the configuration does not allow is not contacted.
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../shared/infra/db';
import { recordDeliveryAttempt, subscribedEndpoints, wasDelivered } from '../shared/infra/db/webhooks';
import { refusedTarget, type TargetPolicy } from '../shared/infra/network-targets';
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
        // Checked at every delivery, not only at registration: a name may resolve elsewhere now.
        const refused = await refusedTarget(ep.url, policy);
        if (refused) error = `refused: ${refused}`;
        else
          try {
            const res = await fetch(ep.url, {
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                'user-agent': 'Kumoss-Webhooks',
                'kumoss-event': input.event,
                'kumoss-delivery': input.delivery_id,
                [SIGNATURE_HEADER]: signatureHeader(ep.secret, body),
              },
              body,
              redirect: 'manual',
              signal: AbortSignal.timeout(deps.timeoutMs ?? 10_000),
            });
            status = res.status;
            await res.body?.cancel();
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
