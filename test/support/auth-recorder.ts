// An HTTPS server on loopback that answers every request as a forge asks for credentials (401 with
// a Basic challenge: git then sends whatever header it was configured with) and records the
// Authorization header each request carried — to prove which credential reached which origin.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface AuthRecorder {
  server: Server;
  /** `https://127.0.0.1:<port>` */
  origin: string;
  /** The Authorization header of every request, in order (undefined: none). */
  authorization: (string | undefined)[];
}

export async function startAuthRecorder(cert: { certPath: string; keyPath: string }): Promise<AuthRecorder> {
  const authorization: (string | undefined)[] = [];
  const server = createServer(
    { cert: readFileSync(cert.certPath), key: readFileSync(cert.keyPath) },
    (req, res) => {
      authorization.push(req.headers.authorization);
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, authorization };
}
