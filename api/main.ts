// The API process.
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { ArtifactStore, createS3Client } from '../shared/infra/object-store';
import { join } from 'node:path';
import { databaseUrl, gitTrustBundle, loadConfig, projectRoot, targetPolicy } from '../shared/infra/config';
import { createDb, migrate } from '../shared/infra/db';
import { logger, quietKnownWarnings } from '../shared/infra/logger';
import { dataConverter, payloadCodecFromEnv } from '../shared/infra/payload-codec';
import { workflowOrganizations } from '../shared/infra/db/workflow-organizations';
import { secretBoxFromEnv } from '../shared/infra/secret-box';
import { connectClient, temporalTarget } from '../shared/infra/temporal-connection';
import { ensureSearchAttributes } from '../shared/infra/temporal-setup';
import { startTracing } from '../shared/infra/tracing';
import { createApp } from './app';
import { startEventsHub } from './events-hub';
import { databaseCheck, forgeCheck, gitHostCheck, storageCheck, temporalCheck, workerCheck } from './checks';

quietKnownWarnings();
const config = loadConfig();
const log = logger.child({ component: 'api' });
const tracing = startTracing({ service: 'kumoss-api', endpoint: config.observability.otlp_endpoint });
const db = createDb(databaseUrl(config));
// One LISTEN connection for every event stream of this process.
const hub = startEventsHub(databaseUrl(config), (err) => log.warn({ err }, 'events hub reconnecting'));
await migrate(db);
const temporal = temporalTarget(config.temporal);
const connection = await connectClient(temporal);
const added = await ensureSearchAttributes(connection, temporal.namespace);
if (added.length) log.info({ namespace: temporal.namespace, added }, 'search attributes registered');
const codec = payloadCodecFromEnv(process.env, workflowOrganizations(db));
const secretBox = secretBoxFromEnv();
const artifacts = new ArtifactStore(createS3Client(config.storage), config.storage.bucket);
const app = createApp({
  checks: [
    temporalCheck(connection, temporal.namespace),
    workerCheck(connection, temporal.namespace, config.temporal.task_queue),
    storageCheck(artifacts),
    databaseCheck(db),
    gitHostCheck(`https://${config.git_host.host}:${config.git_host.port}`, gitTrustBundle(config)),
    ...(config.services.gitea.url ? [forgeCheck(config.services.gitea.url, gitTrustBundle(config))] : []),
  ],
  log: (err) => log.error({ err }, 'unhandled error'),
  ...(config.observability.request_log ? { requestLog: log.child({ component: 'http' }) } : {}),
  metrics: config.observability.api_metrics,
  rateLimits: config.security.rate_limits,
  // Built by the launcher when missing or stale (scripts/web-build.ts).
  webDist: join(projectRoot, 'web', 'dist'),
  artifactOrigin: config.storage.endpoint,
  temporalUiUrl: config.temporal.ui_url,
  authz: config.services.authz,
  mapping: config.services.mapping,
  codec: {
    codec,
    uiOrigin: new URL(config.temporal.ui_url).origin,
  },
  sessions: {
    db,
    client: new Client({
      connection,
      namespace: temporal.namespace,
      dataConverter: dataConverter(codec),
      // Starts, signals and updates carry the request's trace to the workflows.
      ...(tracing ? { interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } } : {}),
    }),
    taskQueue: config.temporal.task_queue,
    targets: targetPolicy(config),
    ...(secretBox ? { secrets: secretBox } : {}),
    googleCertsUrl: config.services.google_oidc.certs_url,
    orchestration: {
      max_drift_reports: config.orchestration.max_drift_reports,
      drift_group_operations: config.orchestration.drift_group_operations,
      activity_heartbeat_seconds: config.orchestration.activity_heartbeat_seconds,
      max_repair_cycles: config.orchestration.max_repair_cycles,
      apply_requires_approval: config.orchestration.apply_requires_approval,
    },
    artifacts,
    presignTtlSeconds: config.storage.presign_ttl_seconds,
    events: {
      pollMs: config.orchestration.session_events_poll_ms,
      maxPolls: config.orchestration.max_session_events_iteration,
    },
    hub,
  },
});
// Express 5 calls this on an error too (with it): the 'error' handler below answers that.
const server = app.listen(config.api.port, config.api.host, (err?: Error) => {
  if (err) return;
  log.info(
    { url: `http://${config.api.host}:${config.api.port}`, tracing: Boolean(tracing) },
    'api listening',
  );
});
server.on('error', (err) => {
  log.fatal({ err }, 'api cannot listen');
  process.exit(1);
});
const stop = () => {
  server.close();
  server.closeAllConnections();
  void Promise.all([connection.close(), db.destroy(), hub.close(), tracing?.shutdown()]).then(() =>
    process.exit(0),
  );
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
