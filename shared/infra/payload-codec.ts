// Encrypted workflow payloads: an AES-256-GCM PayloadCodec with its key from the environment
// (KUMOSS_PAYLOAD_KEY, 32 bytes in base64). Inputs, results, signals, queries and failure details
// then reach the Temporal server only as ciphertext; the Web UI shows them through the codec
// endpoint of the API (/codec/decode). Node-only: codecs run outside the workflow sandbox.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
const KEY_ID_HEADER = 'encryption-key-id';
const PayloadProto = proto.temporal.api.common.v1.Payload;

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | null | undefined): string => (b ? new TextDecoder().decode(b) : '');

export class PayloadCodecError extends Error {
  override name = 'PayloadCodecError';
}

export class AesGcmPayloadCodec implements PayloadCodec {
  /** keys: id → 32-byte key; `current` encrypts, every key decrypts (rotation). */
  constructor(
    private readonly keys: Map<string, Uint8Array>,
    private readonly current: string,
  ) {
    for (const [id, key] of keys) {
      if (key.length !== 32)
        throw new PayloadCodecError(`payload key ${id} must be 32 bytes (got ${key.length})`);
    }
    if (!keys.has(current)) throw new PayloadCodecError(`no payload key ${current}`);
  }

  encode(payloads: Payload[]): Promise<Payload[]> {
    const key = this.keys.get(this.current) as Uint8Array;
    return Promise.resolve(
      payloads.map((p) => {
        const iv = randomBytes(12);
        const cipher = createCipheriv('aes-256-gcm', key, iv);
        const plain = PayloadProto.encode(p).finish();
        const data = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
        return {
          metadata: { encoding: utf8(ENCRYPTED_ENCODING), [KEY_ID_HEADER]: utf8(this.current) },
          data,
        };
      }),
    );
  }

  decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(
      payloads.map((p) => {
        if (text(p.metadata?.encoding) !== ENCRYPTED_ENCODING) return p;
        const id = text(p.metadata?.[KEY_ID_HEADER]);
        const key = this.keys.get(id);
        if (!key) throw new PayloadCodecError(`payload encrypted with unknown key id ${id}`);
        const data = Buffer.from(p.data ?? new Uint8Array());
        const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, 12));
        decipher.setAuthTag(data.subarray(data.length - 16));
        const plain = Buffer.concat([decipher.update(data.subarray(12, data.length - 16)), decipher.final()]);
        return PayloadProto.decode(plain);
      }),
    );
  }
}

/**
 * The codec the environment asks for: KUMOSS_PAYLOAD_KEY (base64, 32 bytes) with its id
 * KUMOSS_PAYLOAD_KEY_ID (default "k1"); KUMOSS_PAYLOAD_OLD_KEYS ("id:base64,…") still decrypt.
 * Undefined when no key is set (payloads stay plain JSON).
 */
export function payloadCodecFromEnv(env: NodeJS.ProcessEnv = process.env): AesGcmPayloadCodec | undefined {
  const raw = env.KUMOSS_PAYLOAD_KEY;
  if (!raw) return undefined;
  const current = env.KUMOSS_PAYLOAD_KEY_ID || 'k1';
  const keys = new Map<string, Uint8Array>([[current, Buffer.from(raw, 'base64')]]);
  for (const entry of (env.KUMOSS_PAYLOAD_OLD_KEYS ?? '').split(',').filter(Boolean)) {
    const [id, b64] = entry.split(':');
    if (!id || !b64) throw new PayloadCodecError('KUMOSS_PAYLOAD_OLD_KEYS must be "id:base64key,…"');
    keys.set(id, Buffer.from(b64, 'base64'));
  }
  return new AesGcmPayloadCodec(keys, current);
}

/** The data converter option for clients and workers. */
export function dataConverter(
  codec: PayloadCodec | undefined,
): { payloadCodecs: PayloadCodec[] } | undefined {
  return codec ? { payloadCodecs: [codec] } : undefined;
}
