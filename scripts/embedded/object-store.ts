// The embedded S3-compatible object store (s3rver) on loopback. Anything that speaks S3 replaces
// it in production: set storage.endpoint / S3_ENDPOINT and the AWS credentials.
import { mkdirSync } from 'node:fs';
import S3rver from 's3rver';

const ARTIFACT_CORS = `<CORSConfiguration>
  <CORSRule>
    <AllowedOrigin>*</AllowedOrigin>
    <AllowedMethod>GET</AllowedMethod>
    <AllowedMethod>HEAD</AllowedMethod>
    <MaxAgeSeconds>3000</MaxAgeSeconds>
  </CORSRule>
</CORSConfiguration>`;

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
    // The web application reads artifacts from their presigned URLs: GET from any origin (the
    // signature in the URL is the authorization; a real bucket gets the same rule, see README).
    configureBuckets: [{ name: opts.bucket, configs: [ARTIFACT_CORS] }],
  });
  const address = await server.run();
  return {
    endpoint: `http://${opts.host ?? '127.0.0.1'}:${address.port}`,
    port: address.port,
    close: () => server.close(),
  };
}
