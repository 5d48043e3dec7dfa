// Encrypted workflow payloads: an AES-256-GCM PayloadCodec with its key from the environment
// (KUMOSS_PAYLOAD_KEY, 32 bytes in base64). Inputs, results, signals, queries and failure details
// then reach the Temporal server only as ciphertext; the Web UI shows them through the codec
// endpoint of the API (/codec/decode). Node-only: codecs run outside the workflow sandbox.
//
// Each organization's payloads are encrypted with a key of its own, derived from the configured key
// (HKDF-SHA256, the organization's id as info) and named in the payload's `kumoss-organization`
// header: a payload relabelled with another organization fails its authentication tag. The
// organization of a payload is its workflow's (the SDK's serialization context names the workflow):
// learnt from the workflow's own payloads as they are decoded, else looked up (`organizationOf`:
// shared/infra/db/workflow-organizations.ts), else the caller's scope ({@link withOrganization}: the
// API's signed-in user). A payload whose organization is none of these is the system's: the worker
// reads it, the codec endpoint decodes it for nobody.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import proto from '@temporalio/proto';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
const KEY_ID_HEADER = 'encryption-key-id';
/** The organization whose key encrypted a payload (none: the system's key). */
export const ORGANIZATION_HEADER = 'kumoss-organization';
const PayloadProto = proto.temporal.api.common.v1.Payload;

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | null | undefined): string => (b ? new TextDecoder().decode(b) : '');

export class PayloadCodecError extends Error {
  override name = 'PayloadCodecError';
}

/** The organization a workflow belongs to, by its id (undefined: not known). */
export type OrganizationOf = (workflowId: string) => Promise<string | undefined>;

const scope = new AsyncLocalStorage<string>();

/**
 * Runs fn with `organization` as the owner of the payloads it encodes for a workflow the codec
 * cannot place otherwise (a workflow the caller starts under a fresh id).
 */
export function withOrganization<T>(organization: string, fn: () => T): T {
  return scope.run(organization, fn);
}

/** The organization a payload was encrypted for ('' = the system's). */
export function organizationOfPayload(p: Payload): string {
  return text(p.metadata?.[ORGANIZATION_HEADER]);
}

const LEARNT_MAX = 50_000;
const UNKNOWN_FOR_MS = 2_000;

export class AesGcmPayloadCodec implements PayloadCodec {
  private readonly derived = new Map<string, Uint8Array>();
  /** workflow id → organization, as its payloads showed or the lookup said (insertion-ordered, bounded). */
  private readonly learnt = new Map<string, string>();
  private readonly unknown = new Map<string, number>();

  /** keys: id → 32-byte key; `current` encrypts, every key decrypts (rotation). */
  constructor(
    private readonly keys: Map<string, Uint8Array>,
    private readonly current: string,
    private readonly organizationOf?: OrganizationOf,
  ) {
    for (const [id, key] of keys) {
      if (key.length !== 32)
        throw new PayloadCodecError(`payload key ${id} must be 32 bytes (got ${key.length})`);
    }
    if (!keys.has(current)) throw new PayloadCodecError(`no payload key ${current}`);
  }

  /** The key of (key id, organization): HKDF of the configured key, cached. */
  private keyOf(id: string, organization: string): Uint8Array {
    const name = `${id}\0${organization}`;
    let key = this.derived.get(name);
    if (!key) {
      const master = this.keys.get(id);
      if (!master) throw new PayloadCodecError(`payload encrypted with unknown key id ${id}`);
      const info = organization ? `organization:${organization}` : 'system';
      key = new Uint8Array(hkdfSync('sha256', master, 'kumoss-payload-codec', info, 32));
      this.derived.set(name, key);
    }
    return key;
  }

  private learn(workflowId: string, organization: string): void {
    if (this.learnt.has(workflowId)) return;
    if (this.learnt.size >= LEARNT_MAX) this.learnt.delete(this.learnt.keys().next().value as string);
    this.learnt.set(workflowId, organization);
  }

  /** Whose payloads these are: the workflow's organization, else the caller's scope, else ''. */
  private async organizationFor(context: SerializationContext | undefined): Promise<string> {
    const workflowId = context?.workflowId;
    if (workflowId) {
      const known = this.learnt.get(workflowId);
      if (known !== undefined) return known;
      const missed = this.unknown.get(workflowId);
      if (this.organizationOf && !(missed && Date.now() - missed < UNKNOWN_FOR_MS)) {
        const found = await this.organizationOf(workflowId);
        if (found) {
          this.unknown.delete(workflowId);
          this.learn(workflowId, found);
          return found;
        }
        if (this.unknown.size >= LEARNT_MAX) this.unknown.clear();
        this.unknown.set(workflowId, Date.now());
      }
    }
    return scope.getStore() ?? '';
  }

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    if (payloads.length === 0) return payloads;
    return this.encodeFor(payloads, await this.organizationFor(context));
  }

  /** Encrypts for the given organization ('' = the system). */
  encodeFor(payloads: Payload[], organization: string): Promise<Payload[]> {
    const key = this.keyOf(this.current, organization);
    return Promise.resolve(
      payloads.map((p) => {
        const iv = randomBytes(12);
        const cipher = createCipheriv('aes-256-gcm', key, iv);
        const plain = PayloadProto.encode(p).finish();
        const data = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
        return {
          metadata: {
            encoding: utf8(ENCRYPTED_ENCODING),
            [KEY_ID_HEADER]: utf8(this.current),
            ...(organization ? { [ORGANIZATION_HEADER]: utf8(organization) } : {}),
          },
          data,
        };
      }),
    );
  }

  decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return Promise.resolve(
      payloads.map((p) => {
        if (text(p.metadata?.encoding) !== ENCRYPTED_ENCODING) return p;
        const organization = organizationOfPayload(p);
        const plain = this.decrypt(p, organization);
        // A payload that authenticates under an organization's key is that organization's: so is
        // its workflow.
        if (context?.workflowId && organization) this.learn(context.workflowId, organization);
        return plain;
      }),
    );
  }

  /**
   * Decodes only the given organization's payloads (the codec endpoint's caller): any other
   * organization's, and the system's, stay as they are — ciphertext.
   */
  decodeFor(payloads: Payload[], organization: string): Promise<Payload[]> {
    return Promise.resolve(
      payloads.map((p) => {
        if (text(p.metadata?.encoding) !== ENCRYPTED_ENCODING) return p;
        return organization && organizationOfPayload(p) === organization ? this.decrypt(p, organization) : p;
      }),
    );
  }

  private decrypt(p: Payload, organization: string): Payload {
    const key = this.keyOf(text(p.metadata?.[KEY_ID_HEADER]), organization);
    const data = Buffer.from(p.data ?? new Uint8Array());
    if (data.length < 28) throw new PayloadCodecError('payload too short to be a ciphertext');
    const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, 12));
    decipher.setAuthTag(data.subarray(data.length - 16));
    try {
      return PayloadProto.decode(
        Buffer.concat([decipher.update(data.subarray(12, data.length - 16)), decipher.final()]),
      );
    } catch {
      throw new PayloadCodecError(
        'payload does not authenticate (altered, or not encrypted for the organization it names)',
      );
    }
  }
}

/**
 * The codec the environment asks for: KUMOSS_PAYLOAD_KEY (base64, 32 bytes) with its id
 * KUMOSS_PAYLOAD_KEY_ID (default "k1"); KUMOSS_PAYLOAD_OLD_KEYS ("id:base64,…") still decrypt.
 * Undefined when no key is set (payloads stay plain JSON).
 */
export function payloadCodecFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  organizationOf?: OrganizationOf,
): AesGcmPayloadCodec | undefined {
  const raw = env.KUMOSS_PAYLOAD_KEY;
  if (!raw) return undefined;
  const current = env.KUMOSS_PAYLOAD_KEY_ID || 'k1';
  const keys = new Map<string, Uint8Array>([[current, Buffer.from(raw, 'base64')]]);
  for (const entry of (env.KUMOSS_PAYLOAD_OLD_KEYS ?? '').split(',').filter(Boolean)) {
    const [id, b64] = entry.split(':');
    if (!id || !b64) throw new PayloadCodecError('KUMOSS_PAYLOAD_OLD_KEYS must be "id:base64key,…"');
    keys.set(id, Buffer.from(b64, 'base64'));
  }
  return new AesGcmPayloadCodec(keys, current, organizationOf);
}

/** The data converter option for clients and workers. */
export function dataConverter(
  codec: PayloadCodec | undefined,
): { payloadCodecs: PayloadCodec[] } | undefined {
  return codec ? { payloadCodecs: [codec] } : undefined;
}
