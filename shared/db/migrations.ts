// Schema migrations, applied in order by migrate(); never edit one that has shipped, add another.
import { sql, type Kysely } from 'kysely';

export interface Migration {
  id: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations run before the typed schema exists
  up(db: Kysely<any>): Promise<void>;
}

export const migrations: Migration[] = [
  {
    id: '0001_organizations_and_users',
    async up(db) {
      await sql`create table organizations (
        organization_uuid uuid primary key,
        name text not null unique,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table users (
        user_uuid uuid primary key,
        name text not null unique,
        role text not null check (role in ('developer', 'devops', 'admin')),
        organization_uuid uuid not null references organizations(organization_uuid),
        token_sha256 text not null unique,
        created_at timestamptz not null default now()
      )`.execute(db);
    },
  },
  {
    id: '0002_sessions',
    async up(db) {
      await sql`create table sessions (
        session_id text primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        created_by uuid not null references users(user_uuid),
        repository_url text not null,
        cloud text not null,
        scope_id text not null,
        iac_path text not null default '',
        state_project_id text not null,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create index sessions_by_org on sessions (organization_uuid, created_at desc)`.execute(db);
    },
  },
  {
    id: '0003_locks_and_pull_requests',
    async up(db) {
      await sql`create table session_locks (
        session_id text primary key references sessions(session_id),
        locked_by uuid not null references users(user_uuid),
        reason text not null default '',
        locked_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table pull_requests (
        session_id text primary key references sessions(session_id),
        provider text not null,
        number integer not null,
        title text not null,
        description text not null,
        head text not null,
        base text not null,
        url text not null,
        status text not null check (status in ('open', 'merged')),
        merge_commit text,
        created_at timestamptz not null default now(),
        merged_at timestamptz
      )`.execute(db);
    },
  },
  {
    id: '0004_runner_registry',
    async up(db) {
      await sql`create table cloud_connections (
        cloud_connection_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        name text not null,
        provider text not null check (provider in ('aws', 'gcp')),
        region text not null,
        project_id text,
        account_id text,
        created_at timestamptz not null default now(),
        unique (organization_uuid, name)
      )`.execute(db);
      await sql`create table runner_groups (
        runner_group_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        name text not null,
        backend_type text not null check (backend_type in ('aws_ecs', 'gce', 'cloud_run')),
        cloud_connection_uuid uuid references cloud_connections(cloud_connection_uuid),
        environment jsonb not null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        unique (organization_uuid, name)
      )`.execute(db);
      await sql`create table runner_executions (
        runner_execution_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        runner_group_uuid uuid not null references runner_groups(runner_group_uuid),
        workflow_type text not null,
        workflow_uuid text not null unique,
        workflow_run_uuid text not null,
        actor_uuid uuid,
        status text not null,
        outcome text,
        retry_count integer not null default 0,
        retried_from text,
        output jsonb,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`.execute(db);
      await sql`create index runner_executions_by_group on runner_executions (runner_group_uuid, created_at desc)`.execute(
        db,
      );
      await sql`create table runner_environment_drift_plans (
        plan_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        runner_group_uuid uuid not null references runner_groups(runner_group_uuid),
        runner_execution_uuid uuid references runner_executions(runner_execution_uuid),
        workflow_uuid text not null unique,
        plan_status text not null check (plan_status in ('clean', 'drifted', 'blocked')),
        actions_needed jsonb not null,
        blocked_resources jsonb not null,
        drift_summary jsonb not null,
        repair_status text,
        repair_workflow_uuid text,
        created_at timestamptz not null default now(),
        repaired_at timestamptz
      )`.execute(db);
    },
  },
];
