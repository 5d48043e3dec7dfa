// The codec endpoint of Temporal's remote-codec protocol (what the Web UI calls to show encrypted
// payloads decrypted): POST /codec/decode and /codec/encode with {"payloads":[{metadata, data}]},
// every byte field base64. Only for a signed-in user: a valid token (`Authorization: Bearer`) or the
// web application's session cookie, which the Web UI's browser sends along when its codec setting
// "include cross-origin credentials" is on (CORS with credentials, for the Web UI's origin only).
// Where a request comes from proves nothing: an Origin header is the caller's to write.
// Decoding is an admin's, and only of the admin's own organization's payloads: another
// organization's, and the system's, come back as they came — ciphertext. Encoding (the Temporal
// CLI's --codec-endpoint) encrypts for the caller's organization.
import express, { Router, type Request } from 'express';
import type { AesGcmPayloadCodec } from '../../shared/infra/payload-codec';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import { findUserByAuthSession } from '../../shared/infra/db/auth-sessions';
import { findUserByToken, type User } from '../../shared/infra/db/users';
import { cookieValue, SESSION_COOKIE } from '../auth';
import { operation, route } from '../contract';
import { HttpError } from '../errors';
import { parseBody } from '../validation';

export interface CodecRouteDeps {
  codec: Pick<AesGcmPayloadCodec, 'encodeFor' | 'decodeFor'> | undefined;
  /** Origin of the Temporal Web UI (temporal.ui_url): the one origin CORS lets call with credentials. */
  uiOrigin: string;
}

const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
const bodySchema = z
  .object({
    payloads: z
      .array(z.object({ metadata: z.record(z.string(), base64).default({}), data: base64.default('') }))
      .max(1000),
  })
  .strict();

type WirePayload = z.infer<typeof bodySchema>['payloads'][number];

const codecOperation = (op: 'encode' | 'decode') =>
  operation({
    method: 'post',
    path: `/codec/${op}`,
    summary:
      op === 'decode'
        ? "Temporal's remote codec: decode payloads of the caller's organization (an admin's token or session cookie; CORS for the Web UI's origin)"
        : "Temporal's remote codec: encode payloads for the caller's organization (a signed-in user's token or session cookie; CORS for the Web UI's origin)",
    body: bodySchema,
    responses: {
      200: {
        description: `The payloads, ${op}d`,
        schema: z.object({
          payloads: z.array(z.object({ metadata: z.record(z.string(), base64), data: base64 })),
        }),
      },
    },
    errors: op === 'decode' ? [400, 401, 403, 413] : [400, 401, 413],
  });

export const codecOperations = { encode: codecOperation('encode'), decode: codecOperation('decode') };

const fromWire = (p: WirePayload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data, 'base64'),
});

const toWire = (p: { metadata?: Record<string, Uint8Array> | null; data?: Uint8Array | null }) => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

export function createCodecRouter(deps: CodecRouteDeps, db: Db | undefined): Router {
  const router = Router();
  router.use('/codec', (req, res, next) => {
    if (deps.uiOrigin && req.get('origin') === deps.uiOrigin) {
      res.set('Access-Control-Allow-Origin', deps.uiOrigin);
      res.set('Access-Control-Allow-Methods', 'POST, OPTIONS');
      res.set('Access-Control-Allow-Headers', 'Content-Type, X-Namespace, Authorization');
      res.set('Access-Control-Allow-Credentials', 'true');
      res.set('Vary', 'Origin');
    }
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    next();
  });

  const signedIn = async (req: Request): Promise<User | undefined> => {
    if (!db) return undefined;
    const m = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    if (m?.[1]) return findUserByToken(db, m[1]);
    const cookie = cookieValue(req, SESSION_COOKIE);
    return cookie ? findUserByAuthSession(db, cookie) : undefined;
  };

  for (const op of ['encode', 'decode'] as const) {
    route(router, codecOperations[op], express.json({ limit: '4mb' }), async (req, res) => {
      const user = await signedIn(req);
      if (!user) {
        throw new HttpError(
          401,
          'unauthorized',
          'Sign in to Kumoss first: send a valid token, or the web application\'s session cookie (in the Web UI, turn on "include cross-origin credentials" in the codec settings).',
        );
      }
      if (op === 'decode' && user.role !== 'admin') {
        throw new HttpError(
          403,
          'forbidden',
          "Reading workflow payloads is an admin's: sign in as an admin of this organization.",
        );
      }
      const { payloads } = parseBody(bodySchema, req.body);
      const input = payloads.map(fromWire);
      try {
        const org = user.organization_uuid;
        const out = !deps.codec
          ? input
          : op === 'decode'
            ? await deps.codec.decodeFor(input, org)
            : await deps.codec.encodeFor(input, org);
        res.json({ payloads: out.map(toWire) });
      } catch (err) {
        throw new HttpError(400, 'codec_error', `Cannot ${op} these payloads: ${(err as Error).message}`);
      }
    });
  }
  return router;
}
