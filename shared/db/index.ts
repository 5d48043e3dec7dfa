// The metadata store: PostgreSQL through `pg` + Kysely. DATABASE_URL selects a real server; by
// default the embedded PGlite engine that the launcher serves on loopback.
import { Kysely, PostgresDialect, sql, type ColumnType, type Generated } from 'kysely';
import pg from 'pg';
import { migrations } from './migrations';

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
  locked_by: string;
  reason: string;
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
  provider: 'aws' | 'gcp';
  region: string;
  project_id: string | null;
  account_id: string | null;
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

export interface MigrationsTable {
  id: string;
  applied_at: Generated<Date>;
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

export interface Database {
  organizations: OrganizationsTable;
  users: UsersTable;
  sessions: SessionsTable;
  session_rounds: SessionRoundsTable;
  session_events: SessionEventsTable;
  session_locks: SessionLocksTable;
  auth_sessions: AuthSessionsTable;
  session_artifacts: SessionArtifactsTable;
  pull_requests: PullRequestsTable;
  cloud_connections: CloudConnectionsTable;
  runner_groups: RunnerGroupsTable;
  runner_executions: RunnerExecutionsTable;
  runner_environment_drift_plans: RunnerEnvironmentDriftPlansTable;
  stacks: StacksTable;
  detection_runs: DetectionRunsTable;
  drift_items: DriftItemsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  kumoss_migrations: MigrationsTable;
}

export type Db = Kysely<Database>;

export function createDb(url: string, opts: { max?: number } = {}): Db {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 4, connectionTimeoutMillis: 10_000 });
  // An idle connection the server closed (a restart, a shutdown) is dropped and replaced on the
  // next query; unhandled, the pool's 'error' event would end the process.
  pool.on('error', () => undefined);
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** Another process applying the same migration at the same moment (API and worker start together). */
const RACED = new Set(['42P07', '42710', '42701', '23505']); // duplicate table, object, column; unique violation

/**
 * Applies the migrations not applied yet, in order, each in its own transaction. Several processes
 * may migrate one database at once: the one that loses a race on a migration waits, re-reads what
 * is applied and goes on.
 */
export async function migrate(db: Db): Promise<string[]> {
  const applied: string[] = [];
  for (let attempt = 1; ; attempt++) {
    try {
      await sql`create table if not exists kumoss_migrations (
        id text primary key,
        applied_at timestamptz not null default now()
      )`.execute(db);
      const done = new Set(
        (await db.selectFrom('kumoss_migrations').select('id').execute()).map((r) => r.id),
      );
      for (const m of migrations) {
        if (done.has(m.id)) continue;
        await db.transaction().execute(async (trx) => {
          await m.up(trx);
          await trx.insertInto('kumoss_migrations').values({ id: m.id }).execute();
        });
        applied.push(m.id);
      }
      return applied;
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      if (!RACED.has(code) || attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

export async function ping(db: Db): Promise<string> {
  const r = await sql<{ version: string }>`select version() as version`.execute(db);
  return r.rows[0]?.version ?? 'unknown';
}
