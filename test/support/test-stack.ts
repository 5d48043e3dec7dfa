// The real stack of a test run (or a benchmark): a Temporal dev server in memory on free ports
// without UI, the object store, the metadata store, the git host, and one workflow bundle.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { RunnerDeps } from '../../activities/runners';
import { ArtifactStore, createS3Client } from '../../activities/artifacts';
import type { EngineDeps } from '../../activities/drift-detection';
import { GitClient } from '../../activities/git';
import { OfflineModel } from '../../activities/model/offline';
import type { ModelProvider } from '../../activities/model/port';
import { PromptCatalogue } from '../../activities/prompt-catalogue';
import { RoundWorkspaces } from '../../activities/workspace';
import { cliConfigPath, toolPath } from '../../scripts/tools.mjs';
import { projectRoot } from '../../shared/config';
import { startEmbeddedDatabase } from '../../scripts/embedded/database';
import { startGitHost } from '../../scripts/embedded/git-host';
import { startObjectStore } from '../../scripts/embedded/object-store';
import { freePort } from '../../scripts/embedded/ports';
import { loadDevServerSpec, startDevServer } from '../../scripts/embedded/temporal-dev';
import { createWorker, workflowsPath } from '../../worker/worker';

export interface TestStack {
  root: string;
  temporalAddress: string;
  namespace: string;
  s3Endpoint: string;
  bucket: string;
  gitHostUrl: string;
  gitReposDir: string;
  gitCaFile: string;
  databaseUrl: string;
  workflowBundlePath: string;
}

const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} };

export async function startTestStack(): Promise<{ stack: TestStack; stop: () => Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-test-'));
  const spec = {
    ...loadDevServerSpec(),
    port: await freePort(),
    http_port: await freePort(),
    db_filename: undefined,
    headless: true,
  };
  const [temporal, store, gitHost, db, bundle] = await Promise.all([
    startDevServer(spec, { dataDir: root }),
    startObjectStore({ directory: join(root, 's3'), bucket: 'kumoss-test' }),
    startGitHost({ reposDir: join(root, 'git'), certsDir: join(root, 'certs') }),
    startEmbeddedDatabase({}),
    bundleWorkflowCode({ workflowsPath, logger: silent }),
  ]);
  const workflowBundlePath = join(root, 'workflow-bundle.js');
  writeFileSync(workflowBundlePath, bundle.code);
  return {
    stack: {
      root,
      temporalAddress: temporal.address,
      namespace: 'default',
      s3Endpoint: store.endpoint,
      bucket: 'kumoss-test',
      gitHostUrl: gitHost.url,
      gitReposDir: gitHost.reposDir,
      gitCaFile: gitHost.caPath,
      databaseUrl: db.url,
      workflowBundlePath,
    },
    stop: async () => {
      await Promise.allSettled([temporal.stop(), store.close(), gitHost.close(), db.close()]);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface StackWorker {
  client: Client;
  git: GitClient;
  artifacts: ArtifactStore;
  engine: EngineDeps;
  /** Stops the worker and closes the connections. */
  stop(): Promise<void>;
}

/**
 * A worker with the real activities on `taskQueue` of a stack, and a client — for the scripts and
 * benchmarks that run outside vitest (record-histories, bench/).
 */
export async function startStackWorker(
  stack: TestStack,
  taskQueue: string,
  opts: { model?: ModelProvider; onEngineCall?: EngineDeps['onCall']; runners?: RunnerDeps } = {},
): Promise<StackWorker> {
  const git = new GitClient({ caFile: stack.gitCaFile });
  const artifacts = new ArtifactStore(
    createS3Client({ endpoint: stack.s3Endpoint, bucket: stack.bucket, region: 'us-east-1' }),
    stack.bucket,
  );
  const engine: EngineDeps = {
    kind: 'terraform',
    binary: toolPath('terraform'),
    cliConfigFile: cliConfigPath(),
    timeoutMs: 600_000,
    ...(opts.onEngineCall ? { onCall: opts.onEngineCall } : {}),
  };
  const engines = { terraform: engine, tofu: { ...engine, kind: 'tofu' as const, binary: toolPath('tofu') } };
  const native = await NativeConnection.connect({ address: stack.temporalAddress });
  const worker = await createWorker({
    connection: native,
    namespace: stack.namespace,
    taskQueue,
    activities: createActivities({
      engine,
      git,
      artifacts,
      model: opts.model ?? new OfflineModel(),
      catalogue: new PromptCatalogue(join(projectRoot, 'prompts')),
      workspaces: new RoundWorkspaces(mkdtempSync(join(tmpdir(), 'kumoss-ws-')), git, engines, 'terraform'),
      ...(opts.runners ? { runners: opts.runners } : {}),
    }),
    workflowBundlePath: stack.workflowBundlePath,
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: stack.temporalAddress });
  return {
    client: new Client({ connection, namespace: stack.namespace }),
    git,
    artifacts,
    engine,
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
      await native.close();
    },
  };
}
