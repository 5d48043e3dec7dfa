// The embedded S3-compatible object store (s3rver) on loopback. Anything that speaks S3 replaces
// it in production: set storage.endpoint / S3_ENDPOINT and the AWS credentials.
import { mkdirSync } from 'node:fs';
import S3rver from 's3rver';

export interface ObjectStore {
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

export async function startObjectStore(opts: {
  directory: string;
  bucket: string;
  host?: string;
  port?: number;
}): Promise<ObjectStore> {
  mkdirSync(opts.directory, { recursive: true });
  const server = new S3rver({
    address: opts.host ?? '127.0.0.1',
    port: opts.port ?? 0,
    directory: opts.directory,
    silent: true,
    configureBuckets: [{ name: opts.bucket }],
  });
  const address = await server.run();
  return {
    endpoint: `http://${opts.host ?? '127.0.0.1'}:${address.port}`,
    port: address.port,
    close: () => server.close(),
  };
}
