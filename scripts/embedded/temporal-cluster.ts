// A real Temporal cluster on one machine: the server the dev server embeds (go.temporal.io/server
// v1.29.1, built by setup), persistence and visibility on a real PostgreSQL server, its four
// services — frontend, history, matching, worker — each a process of its own, as a self-hosted
// deployment runs them. The schema comes from the server's own SQL tool; the namespaces are
// registered and Kumoss's search attributes added through the operator service
// (shared/infra/temporal-setup.ts), as on any cluster.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { stringify } from 'yaml';
import { ensureSearchAttributes } from '../../shared/infra/temporal-setup';
import { toolPath, waitForTool } from '../../shared/infra/tools.mjs';
import { freeLowPort } from './ports';
import type { PostgresServer } from './postgres';

export const CLUSTER_SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

export interface TemporalCluster {
  address: string;
  /** The service processes, by name (a test may kill one). */
  processes: Record<ClusterService, ChildProcess>;
  stop(): Promise<void>;
}

const SQL_USER = { user: 'temporal', password: 'temporal' };

/** Runs the server's SQL tool against one database. */
async function sqlTool(pg: PostgresServer, database: string, args: string[]): Promise<void> {
  const child = spawn(
    toolPath('temporal-sql-tool'),
    [
      '--plugin',
      'postgres12',
      '--ep',
      '127.0.0.1',
      '-p',
      String(pg.port),
      '-u',
      SQL_USER.user,
      '--pw',
      SQL_USER.password,
      '--db',
      database,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  for (const s of [child.stdout, child.stderr]) s?.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`temporal-sql-tool ${args.join(' ')} on ${database}: ${out.slice(-3000)}`);
}

export async function startTemporalCluster(opts: {
  pg: PostgresServer;
  dir: string;
  namespaces?: string[];
  log?: (service: ClusterService, line: string) => void;
  readyTimeoutMs?: number;
}): Promise<TemporalCluster> {
  await Promise.all([waitForTool('temporal-server'), waitForTool('temporal-sql-tool')]);
  const { pg } = opts;
  // The schema: both databases created and brought to the server's version by its own tool.
  await pg.createDatabase('temporal', SQL_USER);
  await pg.createDatabase('temporal_visibility', SQL_USER);
  await Promise.all(
    (
      [
        ['temporal', 'postgresql/v12/temporal'],
        ['temporal_visibility', 'postgresql/v12/visibility'],
      ] as const
    ).map(async ([db, schema]) => {
      await sqlTool(pg, db, ['setup-schema', '-v', '0.0']);
      await sqlTool(pg, db, ['update-schema', '--schema-name', schema]);
    }),
  );

  const taken = new Set<number>();
  const port = async (): Promise<number> => {
    for (;;) {
      const p = await freeLowPort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const ports = {} as Record<ClusterService, { grpcPort: number; membershipPort: number }>;
  for (const s of CLUSTER_SERVICES) ports[s] = { grpcPort: await port(), membershipPort: await port() };
  const address = `127.0.0.1:${ports.frontend.grpcPort}`;
  const store = (database: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName: database,
      connectAddr: `127.0.0.1:${pg.port}`,
      connectProtocol: 'tcp',
      user: SQL_USER.user,
      password: SQL_USER.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const configDir = join(opts.dir, 'config');
  mkdirSync(join(configDir, 'dynamicconfig'), { recursive: true });
  // What the dev server sets for Kumoss (temporal-dev.yaml) and what a small cluster wants.
  const dynamic = {
    'system.enableActivityEagerExecution': [{ value: true }],
    'frontend.enableUpdateWorkflowExecution': [{ value: true }],
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted': [{ value: true }],
    'system.forceSearchAttributesCacheRefreshOnRead': [{ value: true }],
    'frontend.workerVersioningDataAPIs': [{ value: true }],
  };
  writeFileSync(join(configDir, 'dynamicconfig', 'kumoss.yaml'), stringify(dynamic));
  const services = Object.fromEntries(
    CLUSTER_SERVICES.map((s) => [s, { rpc: { ...ports[s], bindOnLocalHost: true } }]),
  );
  writeFileSync(
    join(configDir, 'development.yaml'),
    stringify({
      log: { stdout: true, level: 'warn' },
      persistence: {
        defaultStore: 'postgres-default',
        visibilityStore: 'postgres-visibility',
        numHistoryShards: 4,
        datastores: {
          'postgres-default': store('temporal', 20),
          'postgres-visibility': store('temporal_visibility', 10),
        },
      },
      global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
      services,
      clusterMetadata: {
        enableGlobalNamespace: false,
        failoverVersionIncrement: 10,
        masterClusterName: 'active',
        currentClusterName: 'active',
        clusterInformation: {
          active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: address },
        },
      },
      dcRedirectionPolicy: { policy: 'noop' },
      archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
      namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
      dynamicConfigClient: { filepath: join(configDir, 'dynamicconfig', 'kumoss.yaml'), pollInterval: '10s' },
    }),
  );

  const processes = {} as Record<ClusterService, ChildProcess>;
  const tails: Record<string, string> = {};
  const exits: string[] = [];
  const launch = (s: ClusterService) => {
    const child = spawn(
      toolPath('temporal-server'),
      ['--root', opts.dir, '--config', 'config', '--env', 'development', 'start', '--service', s],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    tails[s] = '';
    const collect = (d: Buffer) => {
      const text = d.toString();
      tails[s] = (tails[s] + text).slice(-4000);
      if (opts.log) for (const line of text.split('\n')) if (line.trim()) opts.log(s, line);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    child.once('exit', (code) => {
      const tail = tails[s] ?? '';
      const fatal = /"level":"fatal"[^\n]*/.exec(tail)?.[0] ?? tail.trim().split('\n').slice(-3).join(' | ');
      exits.push(`${s} exited with code ${String(code)}${fatal ? `: ${fatal.slice(0, 600)}` : ''}`);
    });
    processes[s] = child;
  };
  const stop = async () => {
    await Promise.all(
      Object.values(processes).map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        const done = new Promise((r) => c.once('exit', r));
        c.kill('SIGTERM');
        await Promise.race([done, new Promise((r) => setTimeout(r, 10_000))]);
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      }),
    );
  };

  // The first service to start writes the cluster's metadata record; services that start together
  // all find it missing, all try to write it, and all but one exit ("Unable to create server").
  // So the frontend starts alone, the others once its record is in the database.
  launch('frontend');
  const metadataDeadline = Date.now() + (opts.readyTimeoutMs ?? 180_000);
  for (;;) {
    if (exits.length) {
      await stop();
      throw new Error(`Temporal cluster: ${exits.join('; ')}`);
    }
    if (await pg.hasRow('temporal', 'select 1 from cluster_metadata_info limit 1')) break;
    if (Date.now() > metadataDeadline) {
      await stop();
      throw new Error('Temporal cluster: the frontend wrote no cluster metadata in time');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const s of CLUSTER_SERVICES) if (s !== 'frontend') launch(s);

  // Ready: the frontend answers, each namespace is registered (its history shard owned), and the
  // search attributes are in place.
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 180_000);
  const namespaces = opts.namespaces ?? ['default'];
  let last = '';
  for (;;) {
    if (exits.length) {
      await stop();
      throw new Error(`Temporal cluster: ${exits.join('; ')}`);
    }
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await conn.workflowService.getSystemInfo({});
        for (const namespace of namespaces) {
          try {
            await conn.workflowService.describeNamespace({ namespace });
          } catch {
            await conn.workflowService.registerNamespace({
              namespace,
              workflowExecutionRetentionPeriod: msToTs('1 day'),
            });
          }
          await ensureSearchAttributes(conn, namespace);
        }
      } finally {
        await conn.close();
      }
      break;
    } catch (err) {
      last = String(err);
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`Temporal cluster at ${address} not ready in time: ${last}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  return { address, processes, stop };
}
