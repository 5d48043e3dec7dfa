// Turns temporal-dev.yaml into `temporal server start-dev` flags, starts the dev server and waits
// until its frontend answers. The same launcher serves `npm start` (SQLite file, fixed ports)
// and the test harness (in-memory, free ports).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { Connection } from '@temporalio/client';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { projectRoot } from '../../shared/infra/config';
import { toolPath } from '../../shared/infra/tools.mjs';

const devServerSchema = z.object({
  ip: z.string().default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(7233),
  ui_port: z.number().int().min(0).max(65535).default(8233),
  db_filename: z.string().optional(),
  namespaces: z.array(z.string().min(1)).default(['default']),
  search_attributes: z
    .record(z.string(), z.enum(['Text', 'Keyword', 'Int', 'Double', 'Bool', 'Datetime', 'KeywordList']))
    .default({}),
  dynamic_config: z.record(z.string(), z.unknown()).default({}),
  log_level: z.enum(['debug', 'info', 'warn', 'error', 'never']).default('warn'),
  /** No Web UI (the test harness). */
  headless: z.boolean().default(false),
  /** The codec endpoint the Web UI decodes encrypted payloads through (the API's /codec). */
  ui_codec_endpoint: z.string().url().optional(),
  /** HTTP API port; 0 lets the CLI choose (port + 1000). */
  http_port: z.number().int().min(0).max(65535).default(0),
});

export type DevServerSpec = z.infer<typeof devServerSchema>;

export function loadDevServerSpec(file = join(projectRoot, 'temporal-dev.yaml')): DevServerSpec {
  const parsed = devServerSchema.safeParse(parseYaml(readFileSync(file, 'utf8')));
  if (!parsed.success) {
    throw new Error(
      `invalid ${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return parsed.data;
}

/** The flags `temporal server start-dev` gets for a spec; `dataDir` anchors a relative db file. */
export function devServerArgs(spec: DevServerSpec, dataDir: string): string[] {
  const args = ['server', 'start-dev', '--ip', spec.ip, '--port', String(spec.port)];
  if (spec.headless) args.push('--headless');
  else {
    args.push('--ui-port', String(spec.ui_port));
    if (spec.ui_codec_endpoint) args.push('--ui-codec-endpoint', spec.ui_codec_endpoint);
  }
  if (spec.http_port) args.push('--http-port', String(spec.http_port));
  if (spec.db_filename) {
    const db = isAbsolute(spec.db_filename) ? spec.db_filename : join(dataDir, spec.db_filename);
    args.push('--db-filename', db);
  }
  for (const ns of spec.namespaces) if (ns !== 'default') args.push('--namespace', ns);
  for (const [key, type] of Object.entries(spec.search_attributes)) {
    args.push('--search-attribute', `${key}=${type}`);
  }
  for (const [key, value] of Object.entries(spec.dynamic_config)) {
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  }
  args.push('--log-level', spec.log_level, '--log-format', 'json');
  return args;
}

const INDEXED_VALUE_TYPES: Record<string, number> = {
  Text: 1,
  Keyword: 2,
  Int: 3,
  Double: 4,
  Bool: 5,
  Datetime: 6,
  KeywordList: 7,
};

/**
 * `--search-attribute` registers attributes only when the SQLite file is new: a data directory made
 * by an older Kumoss lacks the ones added since, so the missing ones are added here.
 */
async function ensureSearchAttributes(
  conn: Connection,
  namespace: string,
  wanted: Record<string, string>,
): Promise<void> {
  const have = await conn.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(wanted).filter(([key]) => !(key in (have.customAttributes ?? {})));
  if (!missing.length) return;
  await conn.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map(([key, type]) => [key, INDEXED_VALUE_TYPES[type] ?? 2])),
  });
}

export interface DevServer {
  address: string;
  uiUrl: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

export async function startDevServer(
  spec: DevServerSpec,
  opts: { dataDir: string; onLog?: (line: string) => void; readyTimeoutMs?: number },
): Promise<DevServer> {
  mkdirSync(opts.dataDir, { recursive: true });
  const child = spawn(toolPath('temporal'), devServerArgs(spec, opts.dataDir), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TEMPORAL_CLI_SHOW_STACKS: '0' },
  });
  let output = '';
  const collect = (d: Buffer): void => {
    const text = d.toString();
    if (output.length < 20000) output += text;
    if (opts.onLog) for (const line of text.split('\n')) if (line.trim()) opts.onLog(line);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const address = `${spec.ip}:${spec.port}`;
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 120_000);
  for (;;) {
    const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('wait'), 250))]);
    if (early !== 'wait') {
      // Why it stopped is at the head of a panic (its goroutines follow) or in its fatal log lines.
      const why = output
        .split('\n')
        .filter((l) => /^panic:|"level":"(fatal|error|dpanic|panic)"/i.test(l))
        .slice(0, 3)
        .join('\n');
      throw new Error(
        `temporal server start-dev exited with code ${String(early)}${why ? `:\n${why}` : ''}\n…\n${output.slice(-2000)}`,
      );
    }
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000 });
      await conn.workflowService.getSystemInfo({});
      try {
        for (const ns of spec.namespaces) await ensureSearchAttributes(conn, ns, spec.search_attributes);
      } finally {
        await conn.close();
      }
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`Temporal dev server at ${address} not ready in time:\n${output.slice(-4000)}`);
      }
    }
  }
  return {
    address,
    uiUrl: `http://${spec.ip}:${spec.ui_port}`,
    process: child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
