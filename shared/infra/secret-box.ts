// Credentials an organization stores with Kumoss (a git connection's token) are sealed with
// AES-256-GCM under KUMOSS_SECRETS_KEY (32 bytes in base64), bound to what they belong to (the
// organization and origin as additional data: a sealed value copied onto another row does not
// open). Only the worker opens them, for the one call that needs them; no route returns them.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export class SecretBoxError extends Error {
  override name = 'SecretBoxError';
}

const VERSION = 'v1';

export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Uint8Array) {
    if (key.length !== 32)
      throw new SecretBoxError(`KUMOSS_SECRETS_KEY must be 32 bytes (got ${key.length})`);
    this.key = Buffer.from(key);
  }

  seal(plain: string, boundTo: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [
      VERSION,
      iv.toString('base64'),
      cipher.getAuthTag().toString('base64'),
      data.toString('base64'),
    ].join(':');
  }

  open(sealed: string, boundTo: string): string {
    const [version, iv, tag, data] = sealed.split(':');
    if (version !== VERSION || !iv || !tag || data === undefined)
      throw new SecretBoxError('not a sealed credential');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
      decipher.setAAD(Buffer.from(boundTo, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError('the sealed credential does not open with this KUMOSS_SECRETS_KEY');
    }
  }
}

/** The box KUMOSS_SECRETS_KEY asks for, or undefined when it is not set. */
export function secretBoxFromEnv(env: Partial<Record<string, string>> = process.env): SecretBox | undefined {
  const raw = env.KUMOSS_SECRETS_KEY;
  if (!raw) return undefined;
  return new SecretBox(Buffer.from(raw, 'base64'));
}

/** A fresh key in the form KUMOSS_SECRETS_KEY takes. */
export function newSecretsKey(): string {
  return randomBytes(32).toString('base64');
}
