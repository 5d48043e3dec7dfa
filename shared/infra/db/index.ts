// The metadata store: PostgreSQL through `pg` + Kysely. DATABASE_URL selects the server; by
// default the embedded PostgreSQL that the launcher runs on loopback.
import { Kysely, PostgresDialect, sql, type ColumnType, type Generated } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { migrations } from './migrations';
import type { PinnedPlan } from '../../contracts';

export interface OrganizationsTable {
  organization_uuid: string;
  name: string;
  created_at: Generated<Date>;
}

export interface UsersTable {
  user_uuid: string;
  name: string;
  role: 'developer' | 'devops' | 'admin';
  organization_uuid: string;
  token_sha256: string;
  created_at: Generated<Date>;
  /** Set when an admin revoked the token; cleared when a new one is issued. */
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface SessionsTable {
  session_id: string;
  organization_uuid: string;
  created_by: string;
  repository_url: string;
  cloud: string;
  scope_id: string;
  iac_path: string;
  state_project_id: string;
  status: Generated<'ACTIVE' | 'FAILED' | 'MERGED'>;
  branch: string;
  /** The operation in flight, `{round_id, kind}`, or null. */
  in_flight: { round_id: string; kind: string } | null;
  /** The plan a generate round pinned (PinnedPlan), or null. */
  pinned_plan: Generated<PinnedPlan | null>;
  /** An admin's override of a pinned plan's deny-level compliance findings, with the reason. */
  compliance_override: Generated<{ round_id: string; reason: string; by: string | null; at: string } | null>;
  /** A second person's approval of the pinned plan (its sha256); stale once another plan is pinned. */
  plan_approval: Generated<{ sha256: string; by: string; name: string; at: string } | null>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface SessionRoundsTable {
  session_id: string;
  round_id: string;
  /** 1, 2, … in the order the session accepted them. */
  position: number;
  kind: string;
  text: string | null;
  status: string;
  workflow_id: string | null;
  outcome: string | null;
  summary: string | null;
  report_key: string | null;
  failure_reason: string | null;
  reason: string | null;
  commit: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface SessionEventsTable {
  session_id: string;
  /** 1, 2, … per session, in commit order: the SSE event id. */
  seq: number;
  /** What wrote it (`<round>:<n>`, `<round>:start`, …): a retried write is a no-op. */
  source_key: string;
  round_id: string | null;
  type: string;
  data: Record<string, unknown>;
  at: Generated<Date>;
}

export interface SessionArtifactsTable {
  key: string;
  session_id: string;
  round_id: string;
  bytes: number;
  content_type: string;
  updated_at: Generated<Date>;
}

export interface AuthSessionsTable {
  session_sha256: string;
  user_uuid: string;
  created_at: Generated<Date>;
  expires_at: Date;
  revoked_at: Date | null;
}

export interface SessionLocksTable {
  session_id: string;
  /** The admin who locked it, or who started the generate round whose plan it guards. */
  locked_by: string | null;
  reason: string;
  /** `admin` (an admin's lock) or `plan` (a pinned plan's, cleared by its apply). */
  kind: Generated<'admin' | 'plan'>;
  locked_at: Generated<Date>;
}

export interface PullRequestsTable {
  session_id: string;
  provider: string;
  number: number | null;
  title: string;
  description: string;
  head: string;
  base: string;
  url: string | null;
  status: 'open' | 'merged';
  merge_commit: string | null;
  created_at: Generated<Date>;
  merged_at: Date | null;
}

export interface CloudConnectionsTable {
  cloud_connection_uuid: string;
  organization_uuid: string;
  name: string;
  provider: 'aws' | 'gcp' | 'azure' | 'oci';
  region: string;
  project_id: string | null;
  account_id: string | null;
  /** AWS: the role the engine's runs assume (activities/cloud-credentials.ts); null: none. */
  role_arn: string | null;
  /** Static credentials for the engine's runs, sealed (shared/infra/secret-box.ts); null: none. */
  credentials_sealed: string | null;
  created_at: Generated<Date>;
}

/**
 * A git host an organization's sessions and stacks may name (issue 26 item 1), with the
 * organization's own credential for it, sealed (shared/infra/secret-box.ts), or none.
 */
export interface GitConnectionsTable {
  git_connection_uuid: string;
  organization_uuid: string;
  /** `https://host[:port]`: a repository URL matches when its origin is this. */
  origin: string;
  kind: 'github' | 'gitlab' | 'gitea' | 'git';
  /** The credential sealed with KUMOSS_SECRETS_KEY, bound to the organization and origin. */
  credential_sealed: string | null;
  created_by: string | null;
  created_at: Generated<Date>;
}

export interface RunnerGroupsTable {
  runner_group_uuid: string;
  organization_uuid: string;
  name: string;
  backend_type: 'aws_ecs' | 'gce' | 'cloud_run';
  cloud_connection_uuid: string | null;
  /** RunnerEnvironment (shared/runner-contracts.ts), validated on the way in. */
  environment: unknown;
  /** Its periodic detection (StackSchedule), when it has one; its Temporal Schedule runs it. */
  schedule: unknown;
  schedule_auto_apply: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface RunnerExecutionsTable {
  runner_execution_uuid: string;
  organization_uuid: string;
  runner_group_uuid: string;
  workflow_type: string;
  workflow_uuid: string;
  workflow_run_uuid: string;
  actor_uuid: string | null;
  status: string;
  outcome: string | null;
  retry_count: Generated<number>;
  retried_from: string | null;
  output: unknown;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface RunnerEnvironmentDriftPlansTable {
  plan_uuid: string;
  organization_uuid: string;
  runner_group_uuid: string;
  runner_execution_uuid: string | null;
  workflow_uuid: string;
  plan_status: 'clean' | 'drifted' | 'blocked';
  actions_needed: unknown;
  blocked_resources: unknown;
  drift_summary: unknown;
  repair_status: string | null;
  repair_workflow_uuid: string | null;
  created_at: Generated<Date>;
  repaired_at: Date | null;
}

/** The log Kumoss kept before Kysely's Migrator (adopted into MIGRATION_TABLE once, then left alone). */
export interface MigrationsTable {
  id: string;
  applied_at: Generated<Date>;
}

/** Kysely's migration log: the applied migrations in order (its own columns). */
export interface SchemaMigrationsTable {
  name: string;
  timestamp: string;
}

export interface StacksTable {
  stack_uuid: string;
  organization_uuid: string;
  name: string;
  repository_url: string;
  iac_path: string;
  cloud: string;
  scope_id: string;
  engine: string;
  branch: string;
  /** StackSchedule (shared/stack-contracts.ts), validated on the way in. */
  schedule: unknown;
  auto_remediate: string;
  created_by: string | null;
  /** The session auto-remediation opened last; another opens only once it is no longer ACTIVE. */
  remediation_session_id: string | null;
  /** The state project id it was created with; null for stacks registered before (legacy id). */
  state_project_id: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface DetectionRunsTable {
  run_id: string;
  stack_uuid: string;
  status: string;
  started_at: Generated<Date>;
  finished_at: Date | null;
  drift_count: Generated<number>;
  opened: Generated<number>;
  resolved: Generated<number>;
  whitelisted: Generated<number>;
  plan_key: string | null;
  report_key: string | null;
  error: string | null;
  /** The session the run's auto-remediation opened. */
  session_id: string | null;
}

export interface StackCloudIdsTable {
  stack_uuid: string;
  organization_uuid: string;
  cloud_id: string;
  address: string;
}

export interface DriftItemsTable {
  drift_item_uuid: string;
  stack_uuid: string;
  address: string;
  attribute: string;
  action: string;
  state: string;
  whitelisted: Generated<boolean>;
  rule_id: string | null;
  first_seen_at: Generated<Date>;
  last_seen_at: Generated<Date>;
  resolved_at: Date | null;
  runs_seen: Generated<number>;
  first_run_id: string;
  last_run_id: string;
  resolved_run_id: string | null;
  /** The remediation session opened for this item, if any. */
  session_id: string | null;
  /** What the code declares and what the cloud has (JSON; sensitive values redacted; bounded). */
  declared: unknown;
  actual: unknown;
  /** Where a drift found only in a provider's mirror attribute comes from. */
  note: string | null;
  /** The audit event that led the run which saw it last (AuditChange JSON); null: none seen. */
  audit: unknown;
}

export interface IngestionSecretsTable {
  organization_uuid: string;
  secret_sha256: string;
  created_at: Generated<Date>;
}

export interface AuditSourcesTable {
  organization_uuid: string;
  cloud: string;
  /** GcpAuditSource */
  settings: unknown;
  updated_at: Generated<Date>;
}

export interface AuditChangesTable {
  organization_uuid: string;
  event_id: string;
  cloud: string;
  actor: string;
  at: string;
  action: string;
  source_address: string;
  /** string[] */
  resource_ids: unknown;
  /** {stack_uuid, addresses}[]; empty: an unmanaged change. */
  stacks: unknown;
  received_at: Generated<Date>;
}

export interface WebhookEndpointsTable {
  endpoint_uuid: string;
  organization_uuid: string;
  url: string;
  secret: string;
  /** WebhookEvent[] */
  events: unknown;
  created_at: Generated<Date>;
}

export interface WebhookDeliveriesTable {
  delivery_id: string;
  endpoint_uuid: string;
  event: string;
  attempts: Generated<number>;
  status_code: number | null;
  error: string | null;
  delivered_at: Date | null;
  updated_at: Generated<Date>;
}

/** A lease on a Kumoss-managed state (activities/managed-state.ts): one engine call at a time. */
export interface StateLocksTable {
  state_project_id: string;
  /** A random id per hold: only its holder renews or releases it. */
  holder: string;
  /** What holds it, for a waiter's message: `terraform apply (round r-…, worker host:pid)`. */
  operation: string;
  acquired_at: Date;
  /** A holder that stopped renewing (a killed worker) loses the lease at this time. */
  expires_at: Date;
}

export interface Database {
  organizations: OrganizationsTable;
  users: UsersTable;
  sessions: SessionsTable;
  session_rounds: SessionRoundsTable;
  session_events: SessionEventsTable;
  session_locks: SessionLocksTable;
  state_locks: StateLocksTable;
  auth_sessions: AuthSessionsTable;
  session_artifacts: SessionArtifactsTable;
  pull_requests: PullRequestsTable;
  cloud_connections: CloudConnectionsTable;
  git_connections: GitConnectionsTable;
  runner_groups: RunnerGroupsTable;
  runner_executions: RunnerExecutionsTable;
  runner_environment_drift_plans: RunnerEnvironmentDriftPlansTable;
  stacks: StacksTable;
  detection_runs: DetectionRunsTable;
  drift_items: DriftItemsTable;
  stack_cloud_ids: StackCloudIdsTable;
  ingestion_secrets: IngestionSecretsTable;
  audit_changes: AuditChangesTable;
  audit_sources: AuditSourcesTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  kumoss_migrations: MigrationsTable;
  kumoss_schema_migrations: SchemaMigrationsTable;
}

export type Db = Kysely<Database>;

export function createDb(url: string, opts: { max?: number } = {}): Db {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 4, connectionTimeoutMillis: 10_000 });
  // An idle connection the server closed (a restart, a shutdown) is dropped and replaced on the
  // next query; unhandled, the pool's 'error' event would end the process.
  pool.on('error', () => undefined);
  // A connection lost while a client is checked out (a transaction between its statements, a
  // server restart or failover) emits 'error' on that client, where the pool no longer listens:
  // unheard, it ends the process. Heard here, the loss reaches the caller as its query's error and
  // the pool drops the client.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

export const MIGRATION_TABLE = 'kumoss_schema_migrations';
const MIGRATION_LOCK_TABLE = 'kumoss_schema_migrations_lock';

/**
 * A database migrated before Kysely's Migrator kept its log in `kumoss_migrations`: its entries
 * move into the Migrator's table (same order, their own times) once, so nothing runs twice.
 * Idempotent, and safe with several processes at once.
 */
async function adoptEarlierLog(db: Db): Promise<void> {
  const earlier = await sql<{
    present: boolean;
  }>`select to_regclass('kumoss_migrations') is not null as present`.execute(db);
  if (!earlier.rows[0]?.present) return;
  // Kysely's own definition of its table (it creates it the same way when missing).
  await sql`create table if not exists ${sql.table(MIGRATION_TABLE)} (
    name varchar(255) not null primary key,
    timestamp varchar(255) not null
  )`
    .execute(db)
    .catch(async (err: unknown) => {
      // Two processes creating it at once: the loser finds it there.
      const again = await sql<{
        present: boolean;
      }>`select to_regclass(${MIGRATION_TABLE}) is not null as present`.execute(db);
      if (!again.rows[0]?.present) throw err;
    });
  await sql`insert into ${sql.table(MIGRATION_TABLE)} (name, timestamp)
    select id, to_char(applied_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') from kumoss_migrations
    on conflict (name) do nothing`.execute(db);
}

/**
 * Applies the migrations not applied yet, in order (Kysely's Migrator: its lock table and
 * PostgreSQL's advisory lock let several processes migrate one database at once — API and worker
 * start together — each migration applied once). Answers the ids this call applied.
 */
export async function migrate(db: Db): Promise<string[]> {
  await adoptEarlierLog(db);
  const migrator = new Migrator({
    db,
    provider: {
      getMigrations: () =>
        Promise.resolve(
          Object.fromEntries(migrations.map((m) => [m.id, { up: (d: Kysely<unknown>) => m.up(d) }])),
        ),
    },
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: MIGRATION_LOCK_TABLE,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    const message = error instanceof Error ? error.message : JSON.stringify(error);
    throw new Error(`migration ${failed ?? ''} failed: ${message}`, { cause: error });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

export async function ping(db: Db): Promise<string> {
  const r = await sql<{ version: string }>`select version() as version`.execute(db);
  return r.rows[0]?.version ?? 'unknown';
}
