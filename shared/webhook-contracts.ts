// Signed webhooks as the API shows them: the events an organization's endpoints subscribe to, the
// endpoint a devops user registers, and the log of its deliveries. Sandbox-safe: workflows import
// it. Signing and checking signatures is Node's crypto (shared/infra/webhooks.ts).
import { z } from 'zod';
import { isLoopback } from './contracts';

export const WEBHOOK_EVENTS = [
  'drift.detected',
  'drift.resolved',
  'detection.failed',
  'detection.clean',
] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export const webhookSpecSchema = z
  .object({
    url: z
      .string()
      .max(2048)
      .superRefine((value, ctx) => {
        let url: URL;
        try {
          url = new URL(value);
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be an absolute URL' });
          return;
        }
        // Plain http only to this machine (a local receiver); anything else travels encrypted.
        if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(value)))
          ctx.addIssue({ code: 'custom', message: 'must use https:// (http:// only on loopback)' });
        if (url.username || url.password)
          ctx.addIssue({ code: 'custom', message: 'must not carry credentials' });
      }),
    events: z.array(z.enum(WEBHOOK_EVENTS)).min(1, 'must name at least one event').max(WEBHOOK_EVENTS.length),
  })
  .strict();
export type WebhookSpec = z.infer<typeof webhookSpecSchema>;

/** An endpoint as lists show it: never its secret. */
export const webhookEndpointSchema = z.object({
  endpoint_uuid: z.uuid(),
  organization_uuid: z.uuid(),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
});
export type WebhookEndpoint = z.infer<typeof webhookEndpointSchema>;

/** The answer to registering one: the endpoint and, this once, its signing secret. */
export const webhookCreatedSchema = webhookEndpointSchema.extend({
  secret: z.string().describe('The signing secret, shown only here: keep it to check signatures.'),
});
export const webhookListSchema = z.object({ webhooks: z.array(webhookEndpointSchema) });

/** One delivery to one endpoint: its attempts, the last answer, and when it got through. */
export const webhookDeliverySchema = z.object({
  delivery_id: z.string(),
  event: z.string(),
  attempts: z.number().int(),
  status_code: z.number().int().nullable(),
  error: z.string().nullable(),
  delivered_at: z.string().nullable(),
});
export type WebhookDelivery = z.infer<typeof webhookDeliverySchema>;
export const webhookDeliveryListSchema = z.object({ deliveries: z.array(webhookDeliverySchema) });
