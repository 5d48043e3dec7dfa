import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freeLowPort } from '../../scripts/embedded/ports';
import { devServerArgs, loadDevServerSpec, startDevServer } from '../../scripts/embedded/temporal-dev';

describe('temporal-dev.yaml', () => {
  it('becomes start-dev flags: SQLite file in the data dir, search attributes, dynamic config', () => {
    const args = devServerArgs(loadDevServerSpec(), '/data');
    const joined = args.join(' ');
    expect(args.slice(0, 2)).toEqual(['server', 'start-dev']);
    expect(joined).toContain('--port 7233');
    expect(joined).toContain('--ui-port 8233');
    expect(joined).toContain('--db-filename /data/temporal.sqlite');
    expect(joined).toContain('--search-attribute KumossSessionId=Keyword');
    expect(joined).toContain('--dynamic-config-value frontend.enableUpdateWorkflowExecution=true');
  });

  it('runs headless and in memory when the harness asks', () => {
    const args = devServerArgs({ ...loadDevServerSpec(), headless: true, db_filename: undefined }, '/data');
    expect(args).toContain('--headless');
    expect(args).not.toContain('--ui-port');
    expect(args).not.toContain('--db-filename');
  });
});

describe('the dev server that cannot start', () => {
  it("fails with the reason the server gave (its error line ahead of the output's tail)", async () => {
    // Another process holds the port the server's HTTP API is told to use.
    const held = createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const httpPort = (held.address() as AddressInfo).port;
    const dataDir = mkdtempSync(join(tmpdir(), 'kumoss-devserver-'));
    try {
      const err = await startDevServer(
        {
          ...loadDevServerSpec(),
          port: await freeLowPort(),
          http_port: httpPort,
          headless: true,
          db_filename: undefined,
        },
        { dataDir, readyTimeoutMs: 60_000 },
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      const [head] = (err as Error).message.split('\n…\n');
      expect(head).toMatch(/exited with code \d+:\n\{/);
      expect(head).toContain(`${httpPort}`);
      expect(head).toMatch(/address already in use/);
    } finally {
      held.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
