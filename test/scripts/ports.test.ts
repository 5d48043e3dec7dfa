import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { assertPortFree, freePort, PortTakenError } from '../../scripts/embedded/ports';

describe('port checks of the launcher', () => {
  it('names the port, the component and the setting when a port is taken', async () => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as { port: number }).port;
    try {
      const err = await assertPortFree(port, 'API (api.port)').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PortTakenError);
      expect((err as Error).message).toContain(`127.0.0.1:${port} (API (api.port)) is already in use`);
    } finally {
      srv.close();
    }
  });

  it('accepts a free port', async () => {
    await expect(assertPortFree(await freePort(), 'test')).resolves.toBeUndefined();
  });
});
