import { createServer } from 'node:net';

/** Asks the kernel for a free loopback port (for servers that cannot report the one they got). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

export class PortTakenError extends Error {
  override name = 'PortTakenError';
}

/** Fails with a message a person can act on when `port` is already in use. */
export async function assertPortFree(port: number, what: string, host = '127.0.0.1'): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolveFree, reject) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(
          new PortTakenError(
            `port ${host}:${port} (${what}) is already in use — stop whatever holds it ` +
              `(\`ss -ltnp 'sport = :${port}'\` shows it) or choose another port in kumoss.yaml`,
          ),
        );
      } else reject(err);
    });
    srv.listen(port, host, () => srv.close(() => resolveFree()));
  });
}
