// What a test file needs from the run's stack: clients, a worker on its own task queue.
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from '../../shared/infra/tracing';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { PayloadCodec } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { inject } from 'vitest';
import type { Activities } from '../../activities';
import { ArtifactStore, createS3Client } from '../../shared/infra/object-store';
import { createDb, type Db } from '../../shared/infra/db';
import { artifactIndex } from '../../shared/infra/db/artifacts';
import { GitClient } from '../../activities/git';
import { createWorker, type KumossWorker } from '../../worker/worker';
import { quietKnownWarnings } from '../../shared/infra/logger';
import { projectRoot } from '../../shared/infra/config';
import type { DriftRoundInput } from '../../shared/contracts';
import { createDriftTestBed, type DriftTestBed } from './drift-test-bed';
import { createAwsTestBed, DEMO_ROOT, type AwsTestBed } from './aws-test-bed';
import type { ManagedState } from '../../activities/managed-state';
import type { TestStack } from './global-setup';
import { expectedSdkNotice } from '../../worker/runtime';
import { stackActivities, stackEngineDeps, type EngineKind, type TestActivityOptions } from './test-stack';

// Worker lifecycle lines are noise in test output; warnings and errors still show.
quietKnownWarnings();
/** Warnings and errors the workers and workflows of this test file logged (messages only). */
export const workerLogs: string[] = [];
Runtime.install({
  logger: new DefaultLogger('WARN', (entry) => {
    if (expectedSdkNotice(entry)) return;
    workerLogs.push(entry.message);
    console.warn(`[worker ${entry.level}] ${entry.message}`);
  }),
});

export function stack(): TestStack {
  return inject('stack');
}

let indexDb: Db | undefined;

/** The run's object store, recording what it writes in the artifact index as the worker's does. */
/**
 * The object store (or `real`), refusing the first `putJson` of a key `refused` matches (an object
 * store unavailable for a moment): that write throws 'object store unavailable', every other goes
 * through.
 */
export function storeRefusingOnce(refused: (key: string) => boolean, real = artifactStore()): ArtifactStore {
  let refuse = true;
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'putJson')
        return async (k: string, v: unknown) => {
          if (refuse && refused(k)) {
            refuse = false;
            throw new Error('object store unavailable');
          }
          return target.putJson(k, v);
        };
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

export function artifactStore(): ArtifactStore {
  const s = stack();
  indexDb ??= createDb(s.databaseUrl, { max: 2 });
  return new ArtifactStore(
    createS3Client({ endpoint: s.s3Endpoint, bucket: s.bucket, region: 'us-east-1' }),
    s.bucket,
    artifactIndex(indexDb),
  );
}

export function gitClient(): GitClient {
  return new GitClient({ caFile: stack().gitCaFile });
}

export const ENGINES = ['terraform', 'tofu'] as const satisfies readonly EngineKind[];
export type { EngineKind, TestActivityOptions };
export const engineDeps = stackEngineDeps;

export function testActivities(opts: TestActivityOptions | EngineKind = {}): Activities {
  return stackActivities(stack(), typeof opts === 'string' ? { engine: opts } : opts).activities;
}

export interface TemporalHarness {
  client: Client;
  taskQueue: string;
  worker: KumossWorker;
  /** Stops the worker (it runs from creation until then) and closes the connections. */
  close(): Promise<void>;
}

/** A worker on a task queue of its own (unique per test file) and a client, on the run's server. */
export async function temporalHarness(
  name: string,
  activities: Activities = testActivities(),
  opts: {
    dataConverter?: { payloadCodecs: PayloadCodec[] };
    tracing?: Tracing;
    identity?: string;
    /** Stack detections the worker runs at once (default: twice the cores). */
    detections?: number;
  } = {},
): Promise<TemporalHarness> {
  const s = stack();
  const taskQueue = `test-${name}-${randomUUID().slice(0, 8)}`;
  const nativeConnection = await NativeConnection.connect({ address: s.temporalAddress });
  const connection = await Connection.connect({ address: s.temporalAddress });
  const client = new Client({
    connection,
    namespace: s.namespace,
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    // A traced harness's client carries the caller's trace into what it starts, as the API's does.
    ...(opts.tracing ? { interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } } : {}),
  });
  const worker = await createWorker({
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    connection: nativeConnection,
    namespace: s.namespace,
    taskQueue,
    activities,
    ...(opts.identity ? { identity: opts.identity } : {}),
    ...(opts.detections ? { detections: opts.detections } : {}),
    ...(opts.tracing ? { tracing: opts.tracing } : { workflowBundlePath: s.workflowBundlePath }),
  });
  const running = worker.run();
  return {
    client,
    taskQueue,
    worker,
    async close() {
      // A test may have stopped the worker itself (to hand its work to another).
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
      await nativeConnection.close();
    },
  };
}

/** Every string in a workflow history, payload bytes decoded as UTF-8 (to scan for secrets). */
export { flattenText as historyText } from './secret-scan';

/**
 * The AWS-shaped demo root (kumoss/aws into the run's moto), applied with terraform and pushed to
 * the run's git host; `managed` applies it with Kumoss-managed state instead of a local backend.
 */
export function demoAwsBed(managed?: {
  state: ManagedState;
  scopeId: string;
  organizationUuid: string;
}): Promise<AwsTestBed> {
  const s = stack();
  return createAwsTestBed({
    spec: DEMO_ROOT,
    gitHostUrl: s.gitHostUrl,
    git: gitClient(),
    engine: stackEngineDeps('terraform', s.awsEndpoint),
    ...(managed ? { managed } : {}),
  });
}

/** A drift test bed on the run's git host, applied with `engine`. */
export function newTestBed(opts: { engine?: EngineKind; withTime?: boolean } = {}): Promise<DriftTestBed> {
  return createDriftTestBed({
    gitHostUrl: stack().gitHostUrl,
    git: gitClient(),
    engine: engineDeps(opts.engine),
    ...(opts.withTime === undefined ? {} : { withTime: opts.withTime }),
  });
}

/** A drift round's input on a repository, with test defaults (full mode, aws, a fresh session). */
export function roundInput(repositoryUrl: string, overrides: Partial<DriftRoundInput> = {}): DriftRoundInput {
  return {
    session_id: `s-${randomUUID().slice(0, 8)}`,
    round_id: 'r1',
    mode: 'full',
    repository_url: repositoryUrl,
    cloud: 'aws',
    scope_id: 'scope-test',
    text: 'Reconcile everything.',
    ...overrides,
  };
}

/**
 * Waits until the server lists `activityType` as a started pending activity of the run, i.e. it is
 * running on a worker right now (history records an activity's start only once the attempt ends).
 */
export async function untilActivityRunning(
  handle: WorkflowHandle,
  activityType: string,
  timeoutMs = 60_000,
): Promise<void> {
  const started = proto.temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    const pending = (await handle.describe()).raw.pendingActivities ?? [];
    if (pending.some((a) => a.activityType?.name === activityType && a.state === started)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${activityType} did not start within ${timeoutMs} ms`);
}

/** The rule that whitelists the drift test bed's replica count (`rest_object.app_config`). */
export const REPLICAS_RULE = [
  '  - id: replicas-tuned-by-oncall',
  '    resource_type: rest_object',
  '    address: rest_object.app_*',
  '    attribute: data.replicas',
  '    reason: The on-call team tunes replica counts by hand.',
];

/** A copy of the prompt catalogue whose aws exception rules are `rules` (YAML list lines). */
export function promptsWithAwsRules(rules: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-prompts-'));
  cpSync(join(projectRoot, 'prompts'), dir, { recursive: true });
  writeFileSync(
    join(dir, 'aws-guidelines-drift_exceptions.yaml'),
    ['guidance: Replica counts are tuned by the on-call team.', 'rules:', ...rules, ''].join('\n'),
  );
  return dir;
}

/** A repository on the stack's git host holding `files` on `main` (a working copy under `root`). */
export function seedRepository(root: string, name: string, files: Record<string, string>): string {
  const git = gitClient();
  const src = mkdtempSync(join(root, 'src-'));
  const run = (...args: string[]) => execFileSync('git', args, { cwd: src, env: git.env(), stdio: 'pipe' });
  run('init', '--quiet', '--initial-branch=main');
  for (const [f, text] of Object.entries(files)) writeFileSync(join(src, f), text);
  run('add', '--all');
  run('commit', '--quiet', '-m', 'initial');
  const url = `${stack().gitHostUrl}/${name}.git`;
  run('push', '--quiet', url, 'main');
  return url;
}
