import { createServer } from 'node:net';

/** True when `port` can be bound on `host` right now. */
function bindable(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/**
 * A free loopback port below the kernel's ephemeral range, for servers that store their port in a
 * 16-bit signed column (Temporal's cluster membership table: smallint, at most 32767).
 */
export async function freeLowPort(host = '127.0.0.1', from = 20000, to = 32767): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * (to - from));
    if (await bindable(port, host)) return port;
  }
  throw new Error(`no free port between ${from} and ${to}`);
}

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
