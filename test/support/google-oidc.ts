// Google's OIDC token signing, as a loopback double: the certificates endpoint google-auth-library
// fetches (`oauth2/v1/certs`: PEM by key id) and ID tokens signed RS256 with its key — the tokens a
// Pub/Sub push subscription sends (iss accounts.google.com, aud, email, email_verified, exp).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSign, generateKeyPairSync, type KeyObject } from 'node:crypto';

export interface GoogleCerts {
  certsUrl: string;
  token(claims: Record<string, unknown>, opts?: { expiresIn?: number; foreignKey?: boolean }): string;
  close(): void;
}

const b64url = (v: string | Buffer) => Buffer.from(v).toString('base64url');

export async function startGoogleCerts(): Promise<GoogleCerts> {
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const foreign = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'kumoss-test-key-1';
  const server: Server = createServer((req, res) => {
    if (req.url !== '/oauth2/v1/certs') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600' });
    res.end(JSON.stringify({ [kid]: key.publicKey.export({ type: 'spki', format: 'pem' }) }));
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  const sign = (privateKey: KeyObject, data: string) =>
    createSign('RSA-SHA256').update(data).sign(privateKey);
  return {
    certsUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/v1/certs`,
    token(claims, opts = {}) {
      const now = Math.floor(Date.now() / 1000);
      const exp = now + (opts.expiresIn ?? 3600);
      const head = b64url(JSON.stringify({ alg: 'RS256', kid, typ: 'JWT' }));
      const body = b64url(
        JSON.stringify({
          iss: 'https://accounts.google.com',
          sub: '112233445566778899',
          iat: Math.min(now, exp - 60),
          exp,
          ...claims,
        }),
      );
      const signed = `${head}.${body}`;
      return `${signed}.${b64url(sign(opts.foreignKey ? foreign.privateKey : key.privateKey, signed))}`;
    },
    close: () => server.close(),
  };
}
