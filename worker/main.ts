// The worker process: every workflow and activity on the configured task queue.
import { databaseUrl, loadConfig } from '../shared/infra/config';
import { createDb, migrate } from '../shared/infra/db';
import { logger, quietKnownWarnings } from '../shared/infra/logger';
import { dataConverter, payloadCodecFromEnv } from '../shared/infra/payload-codec';
import { workflowOrganizations } from '../shared/infra/db/workflow-organizations';
import { connectNative, temporalTarget } from '../shared/infra/temporal-connection';
import { ensureSearchAttributes } from '../shared/infra/temporal-setup';
import { startTracing } from '../shared/infra/tracing';
import { startSpawner } from '../activities/process';
import { buildActivities } from './deps';
import { installRuntime } from './runtime';
import { createWorker, detectionsFor, workerIdentity, workflowsPath } from './worker';
import { cachedWorkflowBundle } from './workflow-bundle';

// The engine's and git's processes are started by a small spawner forked now, while this process
// is small: a fork from the grown worker would stop its event loop for tens of milliseconds.
startSpawner();
quietKnownWarnings();
const config = loadConfig();
const log = logger.child({ component: 'worker' });
installRuntime({ log, metricsAddress: config.observability.worker_metrics_address });
const tracing = startTracing({ service: 'kumoss-worker', endpoint: config.observability.otlp_endpoint });
// The workflow bundle, read or built while the worker connects: the cached one when this code was
// bundled before (a traced worker bundles its own, with the tracing interceptors in it).
const t0 = performance.now();
const bundling = tracing ? undefined : cachedWorkflowBundle(workflowsPath);
const temporal = temporalTarget(config.temporal);
const connection = await connectNative(temporal);
const added = await ensureSearchAttributes(connection, temporal.namespace);
if (added.length) log.info({ namespace: temporal.namespace, added }, 'search attributes registered');
const db = createDb(databaseUrl(config));
await migrate(db);
const { activities, artifacts, sandbox } = buildActivities(config, db);
await artifacts.ensureBucket();
// The engine sandbox's state, said once at start-up and carried in the worker's identity, which
// the API's /health reads from the task queue's pollers.
const sandboxState = sandbox.describe();
const sandboxCheck = sandbox.check();
if (!sandboxCheck.ok)
  log.error(
    { sandbox: sandboxState, reason: sandboxCheck.reason },
    'the engine sandbox cannot run on this worker: every engine call is refused (install bubblewrap, or set engine.sandbox: off)',
  );
else if (sandboxState === 'off')
  log.warn(
    { sandbox: sandboxState },
    "engine.sandbox is off: repositories' code runs with this worker's files, environment and credentials in reach",
  );
const bundle = await bundling;
if (bundle)
  log.info(
    { path: bundle.path, seconds: Number(((performance.now() - t0) / 1000).toFixed(2)) },
    bundle.built ? 'workflow bundle built and cached' : 'workflow bundle read from the cache',
  );
const worker = await createWorker({
  identity: workerIdentity(sandboxState),
  connection,
  namespace: temporal.namespace,
  taskQueue: config.temporal.task_queue,
  activities,
  dataConverter: dataConverter(payloadCodecFromEnv(process.env, workflowOrganizations(db))),
  ...(tracing ? { tracing } : {}),
  ...(bundle ? { workflowBundlePath: bundle.path } : {}),
  detections: detectionsFor(config.engine.max_concurrent, config.engine.max_concurrent_detections),
});
log.info(
  {
    taskQueue: config.temporal.task_queue,
    temporal: temporal.describe,
    metrics: config.observability.worker_metrics_address || null,
    tracing: Boolean(tracing),
    sandbox: sandboxState,
  },
  'worker started',
);
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => worker.shutdown());
await worker.run();
await connection.close();
await db.destroy();
await tracing?.shutdown();
log.info('worker stopped');
