// A TLS-terminating gRPC proxy in front of the dev server, as a load balancer or Temporal Cloud's
// edge stands in front of a cluster: HTTP/2 over TLS with ALPN `h2` on loopback, each stream
// forwarded to the dev server over cleartext HTTP/2 with its headers, body and trailers. With
// `requireClientCert` it is mTLS: a client without a certificate signed by the test CA is refused
// in the handshake. It records the request headers it forwards (what reached "the server").
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http2, { type IncomingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TlsFiles {
  caPath: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made by openssl under `dir`. */
export async function makeTlsFiles(dir: string): Promise<TlsFiles> {
  mkdirSync(dir, { recursive: true });
  const f = (n: string) => join(dir, n);
  // prettier-ignore
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'),
    '-days', '30', '-subj', '/CN=Kumoss test Temporal CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  for (const [name, ext] of [
    ['server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n'],
    ['client', 'extendedKeyUsage=clientAuth\n'],
  ] as const) {
    writeFileSync(
      f(`${name}.ext`),
      `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n${ext}`,
    );
    // prettier-ignore
    await run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`),
      '-subj', `/CN=kumoss-${name}`]);
    // prettier-ignore
    await run('openssl', ['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
      '-CAcreateserial', '-out', f(`${name}.pem`), '-days', '30', '-sha256', '-extfile', f(`${name}.ext`)]);
  }
  return {
    caPath: f('ca.pem'),
    serverCert: f('server.pem'),
    serverKey: f('server.key'),
    clientCert: f('client.pem'),
    clientKey: f('client.key'),
  };
}

export interface TlsProxy {
  address: string;
  /** Request headers of every stream forwarded, in order. */
  requests: IncomingHttpHeaders[];
  /** TLS handshakes refused (mTLS without a valid client certificate). */
  refused: number;
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'http2-settings']);

export async function startTlsProxy(opts: {
  upstream: string;
  tls: TlsFiles;
  requireClientCert?: boolean;
}): Promise<TlsProxy> {
  const upstream = http2.connect(`http://${opts.upstream}`);
  upstream.on('error', () => undefined);
  const requests: IncomingHttpHeaders[] = [];
  const proxy: TlsProxy = { address: '', requests, refused: 0, close: () => Promise.resolve() };
  const server = http2.createSecureServer({
    key: readFileSync(opts.tls.serverKey),
    cert: readFileSync(opts.tls.serverCert),
    ALPNProtocols: ['h2'],
    ...(opts.requireClientCert
      ? { requestCert: true, rejectUnauthorized: true, ca: readFileSync(opts.tls.caPath) }
      : {}),
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  server.on('tlsClientError', () => {
    proxy.refused += 1;
  });
  server.on('stream', (stream, headers) => {
    requests.push(headers);
    const forwarded: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(headers)) {
      if (v === undefined || HOP.has(k) || k === ':scheme' || k === ':authority') continue;
      forwarded[k] = v;
    }
    const up = upstream.request({ ...forwarded, ':scheme': 'http', ':authority': opts.upstream });
    let trailers: http2.OutgoingHttpHeaders | undefined;
    up.on('response', (h, flags) => {
      const out: http2.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(h)) if (!HOP.has(k)) out[k] = v;
      // A trailers-only answer (a gRPC error): headers that end the stream.
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) stream.respond(out, { endStream: true });
      else stream.respond(out, { waitForTrailers: true });
    });
    up.on('trailers', (t: http2.IncomingHttpHeaders) => {
      trailers = t;
    });
    stream.on('wantTrailers', () => stream.sendTrailers(trailers ?? {}));
    up.on('data', (chunk: Buffer) => {
      if (!stream.destroyed) stream.write(chunk);
    });
    up.on('end', () => {
      if (!stream.destroyed && !stream.headersSent) stream.respond({ ':status': 502 }, { endStream: true });
      else if (!stream.destroyed) stream.end();
    });
    up.on('error', () => stream.destroy());
    stream.on('data', (chunk: Buffer) => up.write(chunk));
    stream.on('end', () => up.end());
    stream.on('close', () => {
      if (!up.closed) up.close();
    });
    stream.on('error', () => up.close());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = async () => {
    upstream.close();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Long-polls still open: their sessions end now.
    for (const s of sessions) s.destroy();
    await closed;
  };
  return proxy;
}
