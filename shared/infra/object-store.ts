// Artifacts in S3-compatible object storage, for the activities (writes) and the API (presigned reads). Keys are deterministic (a retried activity
// overwrites the same object instead of writing a second one). Presigned GET URLs expire.
import { createReadStream, createWriteStream, statSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';

export interface StorageConfig {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/**
 * The store's credentials: given, else `KUMOSS_STORAGE_ACCESS_KEY_ID` /
 * `KUMOSS_STORAGE_SECRET_ACCESS_KEY`, else the embedded store's own (s3rver's). Never the process's
 * `AWS_*` variables: those are a cloud identity, and the store's keys are nobody's cloud keys.
 */
export function storageCredentials(
  cfg: StorageConfig,
  env: NodeJS.ProcessEnv = process.env,
): { accessKeyId: string; secretAccessKey: string } {
  return {
    accessKeyId: cfg.accessKeyId ?? env.KUMOSS_STORAGE_ACCESS_KEY_ID ?? 'S3RVER',
    secretAccessKey: cfg.secretAccessKey ?? env.KUMOSS_STORAGE_SECRET_ACCESS_KEY ?? 'S3RVER',
  };
}

/** Client settings that work with s3rver, moto and real S3 alike (see FIELD-NOTES: checksums). */
export function createS3Client(cfg: StorageConfig): S3Client {
  return new S3Client({
    endpoint: cfg.endpoint,
    region: cfg.region,
    forcePathStyle: true,
    credentials: storageCredentials(cfg),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

export interface ArtifactRef {
  key: string;
  bytes: number;
  contentType: string;
}

/** Told of every object written (the metadata store's artifact index: shared/infra/db/artifacts.ts). */
export interface ArtifactIndex {
  recorded(ref: ArtifactRef): Promise<void>;
}

/** A presigned URL is handed out while more than this is left of it: a fifth of its lifetime, at most a minute. */
export function reuseMargin(ttlSeconds: number): number {
  return Math.min(60_000, ttlSeconds * 200);
}

export class ArtifactStore {
  constructor(
    readonly s3: S3Client,
    readonly bucket: string,
    private readonly index?: ArtifactIndex,
  ) {}

  private async written(ref: ArtifactRef): Promise<ArtifactRef> {
    await this.index?.recorded(ref);
    return ref;
  }

  async ensureBucket(): Promise<void> {
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      await this.s3.send(new CreateBucketCommand({ Bucket: this.bucket }));
    }
  }

  async putText(key: string, body: string, contentType = 'text/plain; charset=utf-8'): Promise<ArtifactRef> {
    await this.s3.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }),
    );
    return this.written({ key, bytes: Buffer.byteLength(body), contentType });
  }

  async putJson(key: string, value: unknown): Promise<ArtifactRef> {
    return this.putText(key, JSON.stringify(value, null, 2), 'application/json');
  }

  /** Uploads a file from disk with a known length (streams, so a large plan never sits in memory). */
  async putFile(key: string, path: string, contentType = 'application/octet-stream'): Promise<ArtifactRef> {
    const bytes = statSync(path).size;
    await this.s3.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: createReadStream(path),
        ContentLength: bytes,
        ContentType: contentType,
      }),
    );
    return this.written({ key, bytes, contentType });
  }

  async getText(key: string): Promise<string> {
    const res = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    if (!res.Body) throw new Error(`artifact ${key} has no body`);
    return res.Body.transformToString('utf8');
  }

  /** Streams an object to a file (plans are binary and can be large). */
  async download(key: string, path: string): Promise<void> {
    const res = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    if (!res.Body) throw new Error(`artifact ${key} has no body`);
    await pipeline(res.Body as Readable, createWriteStream(path));
  }

  /**
   * Every key under `prefix`, a page of up to 1,000 at a time. ListObjects (v1) with the last key as
   * the marker: the embedded s3rver answers any truncated ListObjectsV2 page with a 500, and every
   * S3-compatible store serves v1.
   */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let marker: string | undefined;
    for (;;) {
      const res = await this.s3.send(
        new ListObjectsCommand({
          Bucket: this.bucket,
          Prefix: prefix,
          ...(marker ? { Marker: marker } : {}),
        }),
      );
      for (const o of res.Contents ?? []) if (o.Key) keys.push(o.Key);
      marker = keys.at(-1);
      if (!res.IsTruncated || !marker) return keys;
    }
  }

  private readonly presigned = new Map<string, { url: string; expiresAt: number; ttl: number }>();

  /**
   * A GET URL for the key, reused while more than reuseMargin of its lifetime is left: signing is
   * the costly part of a session read. Returns when it expires (epoch ms).
   */
  async presignReused(key: string, ttlSeconds: number): Promise<{ url: string; expiresAt: number }> {
    const now = Date.now();
    const hit = this.presigned.get(key);
    if (hit && hit.ttl === ttlSeconds && hit.expiresAt - now > reuseMargin(ttlSeconds)) return hit;
    const url = await this.presignGet(key, ttlSeconds);
    const fresh = { url, expiresAt: now + ttlSeconds * 1000, ttl: ttlSeconds };
    this.presigned.delete(key);
    this.presigned.set(key, fresh);
    // Bounded: the oldest entries go first (a Map iterates in insertion order).
    for (const old of this.presigned.keys()) {
      if (this.presigned.size <= 20_000) break;
      this.presigned.delete(old);
    }
    return fresh;
  }

  /** A GET URL that works without credentials until it expires. */
  async presignGet(key: string, expiresInSeconds: number): Promise<string> {
    return getSignedUrl(this.s3, new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
      expiresIn: expiresInSeconds,
    });
  }
}
