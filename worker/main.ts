// The worker process: every workflow and activity on the configured task queue.
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { databaseUrl, loadConfig } from '../shared/config';
import { createDb, migrate } from '../shared/db';
import { logger, quietKnownWarnings } from '../shared/logger';
import { dataConverter, payloadCodecFromEnv } from '../shared/payload-codec';
import { ensureSearchAttributes } from '../shared/temporal-setup';
import { buildActivities } from './deps';
import { createWorker } from './worker';

quietKnownWarnings();
// The SDK's own lines (bundle statistics, state changes) only from warnings up; ours are pino.
Runtime.install({ logger: new DefaultLogger('WARN') });
const config = loadConfig();
const log = logger.child({ component: 'worker' });
const connection = await NativeConnection.connect({ address: config.temporal.address });
const added = await ensureSearchAttributes(connection, config.temporal.namespace);
if (added.length) log.info({ namespace: config.temporal.namespace, added }, 'search attributes registered');
const db = createDb(databaseUrl(config));
await migrate(db);
const { activities, artifacts } = buildActivities(config, db);
await artifacts.ensureBucket();
const worker = await createWorker({
  connection,
  namespace: config.temporal.namespace,
  taskQueue: config.temporal.task_queue,
  activities,
  dataConverter: dataConverter(payloadCodecFromEnv()),
});
log.info({ taskQueue: config.temporal.task_queue, address: config.temporal.address }, 'worker started');
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => worker.shutdown());
await worker.run();
await connection.close();
await db.destroy();
log.info('worker stopped');
