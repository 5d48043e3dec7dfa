// Signed webhooks: what a detection announces to an organization's endpoints, and how a receiver
// checks it. The body is signed with HMAC-SHA256 under the endpoint's secret, over
// `<timestamp>.<body>`, sent as `Kumoss-Signature: t=<unix seconds>,v1=<hex>`; a receiver
// recomputes it, compares in constant time and refuses a timestamp outside its replay window.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
export { WEBHOOK_EVENTS, webhookSpecSchema, type WebhookEvent, type WebhookSpec } from '../webhook-contracts';

export const SIGNATURE_HEADER = 'kumoss-signature';
/** How old a signed timestamp may be (either way) before a receiver refuses it. */
export const REPLAY_WINDOW_SECONDS = 300;

export const newWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64url')}`;

export function signature(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

export function signatureHeader(secret: string, body: string, now = Date.now()): string {
  const t = Math.floor(now / 1000);
  return `t=${t},v1=${signature(secret, t, body)}`;
}

/** What a receiver does: true only for this body, signed with this secret, within the window. */
export function verifySignature(
  secret: string,
  header: string | undefined,
  body: string,
  now = Date.now(),
): boolean {
  if (!header) return false;
  const parts = new Map(
    header.split(',').map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()]),
  );
  const t = Number(parts.get('t'));
  const v1 = parts.get('v1') ?? '';
  if (!Number.isInteger(t) || Math.abs(now / 1000 - t) > REPLAY_WINDOW_SECONDS) return false;
  const expected = Buffer.from(signature(secret, t, body), 'hex');
  const given = Buffer.from(/^[0-9a-f]{64}$/.test(v1) ? v1 : '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
