// Schema migrations, applied in order by migrate(); never edit one that has shipped, add another.
import { randomUUID } from 'node:crypto';
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
  {
    // Sessions that end: their state, rounds and events live here, written by the session and
    // round workflows' activities, read by the API (detail, event streams) without asking Temporal.
    id: '0005_session_store',
    async up(db) {
      await sql`alter table sessions
        add column status text not null default 'ACTIVE' check (status in ('ACTIVE', 'FAILED', 'MERGED')),
        add column branch text not null default '',
        add column in_flight jsonb,
        add column updated_at timestamptz not null default now()`.execute(db);
      await sql`update sessions set branch = 'kumoss/' || session_id`.execute(db);
      // No foreign keys on rounds and events: a session or round started from the Temporal CLI with
      // an id of its own (no row in sessions) still records what it does.
      await sql`create table session_rounds (
        session_id text not null,
        round_id text not null,
        position integer not null,
        kind text not null,
        text text,
        status text not null,
        workflow_id text,
        outcome text,
        summary text,
        report_key text,
        failure_reason text,
        reason text,
        commit text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        primary key (session_id, round_id),
        unique (session_id, position)
      )`.execute(db);
      // One ordered log per session: seq is dense and assigned in commit order; source_key makes a
      // retried write a no-op.
      await sql`create table session_events (
        session_id text not null,
        seq integer not null,
        source_key text not null,
        round_id text,
        type text not null,
        data jsonb not null,
        at timestamptz not null default now(),
        primary key (session_id, seq),
        unique (session_id, source_key)
      )`.execute(db);
      // A pull request's number and URL come from the forge; a branch merge on the embedded git
      // host (no forge) has neither.
      await sql`alter table pull_requests
        alter column number drop not null,
        alter column url drop not null`.execute(db);
    },
  },
  {
    // Browser sign-in: a user's token exchanged for a session held in an httpOnly cookie; only the
    // session id's hash is stored, and signing out revokes it.
    id: '0006_auth_sessions',
    async up(db) {
      await sql`create table auth_sessions (
        session_sha256 text primary key,
        user_uuid uuid not null references users(user_uuid),
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        revoked_at timestamptz
      )`.execute(db);
    },
  },
  {
    // Admins revoke a user's token from the admin panel (the row stays: sessions name their
    // creator); a revoked user signs in again only with a newly issued token.
    id: '0007_user_revocation',
    async up(db) {
      await sql`alter table users add column revoked_at timestamptz`.execute(db);
    },
  },
  {
    // The artifacts of a session's rounds, recorded as they are written (the object store's
    // listing is a network call per read): what the session detail lists and presigns.
    id: '0008_session_artifacts',
    async up(db) {
      await sql`create table session_artifacts (
        key text primary key,
        session_id text not null,
        round_id text not null,
        bytes bigint not null,
        content_type text not null,
        updated_at timestamptz not null default now()
      )`.execute(db);
      await sql`create index session_artifacts_by_session on session_artifacts (session_id, key)`.execute(db);
    },
  },
  {
    // Stacks checked for drift on their own schedule, their detection runs, and the drift inbox:
    // one item per (stack, address, attribute), opened by the first run that sees it, resolved by
    // the first that does not.
    id: '0009_stacks',
    async up(db) {
      await sql`create table stacks (
        stack_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        name text not null,
        repository_url text not null,
        iac_path text not null default '',
        cloud text not null,
        scope_id text not null,
        engine text not null default 'terraform',
        branch text not null default '',
        schedule jsonb not null,
        auto_remediate text not null default 'off',
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        unique (organization_uuid, name)
      )`.execute(db);
      await sql`create table detection_runs (
        run_id text primary key,
        stack_uuid uuid not null references stacks(stack_uuid) on delete cascade,
        status text not null,
        started_at timestamptz not null default now(),
        finished_at timestamptz,
        drift_count integer not null default 0,
        opened integer not null default 0,
        resolved integer not null default 0,
        whitelisted integer not null default 0,
        plan_key text,
        report_key text,
        error text
      )`.execute(db);
      await sql`create index detection_runs_by_stack on detection_runs (stack_uuid, started_at desc)`.execute(
        db,
      );
      await sql`create table drift_items (
        drift_item_uuid uuid primary key,
        stack_uuid uuid not null references stacks(stack_uuid) on delete cascade,
        address text not null,
        attribute text not null,
        action text not null,
        state text not null,
        whitelisted boolean not null default false,
        rule_id text,
        first_seen_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now(),
        resolved_at timestamptz,
        runs_seen integer not null default 1,
        first_run_id text not null,
        last_run_id text not null,
        resolved_run_id text,
        unique (stack_uuid, address, attribute)
      )`.execute(db);
      await sql`create index drift_items_by_state on drift_items (stack_uuid, state)`.execute(db);
    },
  },
  {
    // Per-organization webhook endpoints (the secret signs deliveries; shown once) and the log of
    // every delivery attempt with its status code.
    id: '0010_webhooks',
    async up(db) {
      await sql`create table webhook_endpoints (
        endpoint_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        url text not null,
        secret text not null,
        events jsonb not null,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table webhook_deliveries (
        delivery_id text not null,
        endpoint_uuid uuid not null references webhook_endpoints(endpoint_uuid) on delete cascade,
        event text not null,
        attempts integer not null default 0,
        status_code integer,
        error text,
        delivered_at timestamptz,
        updated_at timestamptz not null default now(),
        primary key (delivery_id, endpoint_uuid)
      )`.execute(db);
    },
  },
  {
    // Remediation from the drift inbox: who registered a stack (an auto-opened session is theirs),
    // the session its auto-remediation keeps open (at most one at a time), the session a run opened,
    // and the session opened for each item.
    id: '0011_stack_remediation',
    async up(db) {
      await sql`alter table stacks add column created_by uuid references users(user_uuid) on delete set null`.execute(
        db,
      );
      await sql`alter table stacks add column remediation_session_id text`.execute(db);
      await sql`alter table detection_runs add column session_id text`.execute(db);
      await sql`alter table drift_items add column session_id text`.execute(db);
    },
  },
  {
    // A runner group's periodic detection (its Temporal Schedule runner-schedule:<group>): the
    // schedule as set, and whether its runs may apply repairs.
    id: '0012_runner_schedules',
    async up(db) {
      await sql`alter table runner_groups add column schedule jsonb`.execute(db);
      await sql`alter table runner_groups add column schedule_auto_apply boolean not null default false`.execute(
        db,
      );
    },
  },
  {
    // Generate rounds (issue 16): the plan a session has pinned (hash, commit, state serial, impact),
    // and locks that a generate round sets when it pins one (kind 'plan', cleared by its apply)
    // beside an admin's (kind 'admin').
    id: '0013_pinned_plans',
    async up(db) {
      await sql`alter table sessions add column pinned_plan jsonb`.execute(db);
      await sql`alter table session_locks alter column locked_by drop not null`.execute(db);
      await sql`alter table session_locks add column kind text not null default 'admin'`.execute(db);
    },
  },
  {
    // An admin's recorded override of a pinned plan's deny-level compliance findings (issue 16).
    id: '0014_compliance_override',
    async up(db) {
      await sql`alter table sessions add column compliance_override jsonb`.execute(db);
    },
  },
  {
    // Kumoss-managed state (issue 16): a lease per state project id, held by the engine call that
    // reads or writes that state (plan, apply, import); it expires when its holder stops renewing.
    id: '0015_state_locks',
    async up(db) {
      await sql`
        create table state_locks (
          state_project_id text primary key,
          holder text not null,
          operation text not null,
          acquired_at timestamptz not null,
          expires_at timestamptz not null
        )`.execute(db);
    },
  },
  {
    // State per organization (issue 26): a stack stores the state project id it was created with
    // (organization, repository, path, scope). Stacks registered before keep NULL and read the
    // legacy id of the three (shared/infra/db/sessions.ts legacyStateProjectId), so their state stays.
    id: '0016_stack_state_project',
    async up(db) {
      await sql`alter table stacks add column state_project_id text`.execute(db);
    },
  },
  {
    // User names are unique per organization (issue 26): a global unique name told an admin which
    // names other organizations use (a 409 on someone else's user).
    id: '0017_user_names_per_organization',
    async up(db) {
      await sql`alter table users drop constraint if exists users_name_key`.execute(db);
      await sql`alter table users add constraint users_organization_name_key unique (organization_uuid, name)`.execute(
        db,
      );
    },
  },
  {
    // Cloud connections carry the role an organization's engine runs assume (issue 26 item 2).
    id: '0018_cloud_connection_role',
    async up(db) {
      await sql`alter table cloud_connections add column role_arn text`.execute(db);
    },
  },
  {
    // Four eyes (issue 26 item 8): a second person's approval of the pinned plan, by its hash.
    id: '0019_plan_approval',
    async up(db) {
      await sql`alter table sessions add column plan_approval jsonb`.execute(db);
    },
  },
  {
    // Repository connections (issue 26 item 1): the git hosts an organization's sessions and stacks
    // may name, each with the organization's own sealed credential or none. The origins existing
    // sessions and stacks already use become connections of their organizations (no credential),
    // so they keep working.
    id: '0020_git_connections',
    async up(db) {
      await sql`create table git_connections (
        git_connection_uuid uuid primary key,
        organization_uuid uuid not null references organizations(organization_uuid),
        origin text not null,
        kind text not null check (kind in ('github', 'gitlab', 'gitea', 'git')),
        credential_sealed text,
        created_by uuid references users(user_uuid),
        created_at timestamptz not null default now(),
        unique (organization_uuid, origin)
      )`.execute(db);
      const used = await sql<{ organization_uuid: string; repository_url: string }>`
        select distinct organization_uuid, repository_url from sessions
        union select distinct organization_uuid, repository_url from stacks`.execute(db);
      const origins = new Map<string, { organization_uuid: string; origin: string }>();
      for (const row of used.rows) {
        let origin: string;
        try {
          origin = new URL(row.repository_url).origin;
        } catch {
          continue;
        }
        if (origin === 'null') continue;
        origins.set(`${row.organization_uuid} ${origin}`, {
          organization_uuid: row.organization_uuid,
          origin,
        });
      }
      for (const { organization_uuid, origin } of origins.values()) {
        await sql`insert into git_connections (git_connection_uuid, organization_uuid, origin, kind)
          values (${randomUUID()}, ${organization_uuid}, ${origin}, 'git')
          on conflict do nothing`.execute(db);
      }
    },
  },
  {
    // Cloud connections for every cloud an engine run may target, with static credentials an admin
    // stores for the organization's runs (issue 26 item 2), sealed like git credentials.
    id: '0021_cloud_connection_credentials',
    async up(db) {
      await sql`alter table cloud_connections add column credentials_sealed text`.execute(db);
      await sql`alter table cloud_connections drop constraint if exists cloud_connections_provider_check`.execute(
        db,
      );
      await sql`alter table cloud_connections add constraint cloud_connections_provider_check
        check (provider in ('aws', 'gcp', 'azure', 'oci'))`.execute(db);
    },
  },
  {
    // What the code declares and what the cloud has, per inbox item (sensitive values redacted by
    // the drift derivation; bounded), and where a mirror-only drift comes from.
    id: '0022_drift_item_values',
    async up(db) {
      await sql`alter table drift_items add column declared jsonb, add column actual jsonb, add column note text`.execute(
        db,
      );
    },
  },
  {
    // The cloud ids of the resources in each stack's state, as its last detection saw them: an
    // audit event's resource ids find the stacks and addresses they belong to (issue 30 item 2).
    id: '0023_stack_cloud_ids',
    async up(db) {
      await sql`create table stack_cloud_ids (
        stack_uuid uuid not null references stacks(stack_uuid) on delete cascade,
        organization_uuid uuid not null,
        cloud_id text not null,
        address text not null,
        primary key (stack_uuid, cloud_id, address)
      )`.execute(db);
      await sql`create index stack_cloud_ids_by_id on stack_cloud_ids (organization_uuid, cloud_id)`.execute(
        db,
      );
    },
  },
  {
    // Cloud audit events (issue 30): each organization's ingestion secret (its SHA-256 only: the
    // secret is shown once), the changes its endpoint accepted — with the stacks and addresses they
    // touched, none for an unmanaged change — and, on an inbox item, the change that led to it.
    id: '0024_audit_changes',
    async up(db) {
      await sql`create table ingestion_secrets (
        organization_uuid uuid primary key,
        secret_sha256 text not null,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table audit_changes (
        organization_uuid uuid not null,
        event_id text not null,
        cloud text not null,
        actor text not null,
        at timestamptz not null,
        action text not null,
        source_address text not null,
        resource_ids jsonb not null,
        stacks jsonb not null,
        received_at timestamptz not null default now(),
        primary key (organization_uuid, event_id)
      )`.execute(db);
      await sql`create index audit_changes_by_time on audit_changes (organization_uuid, received_at desc)`.execute(
        db,
      );
      await sql`alter table drift_items add column audit jsonb`.execute(db);
    },
  },
  {
    // Where an organization's GCP audit events come from (issue 30): the OIDC audience its Pub/Sub
    // push subscription sets and the service account the push authenticates as.
    id: '0025_audit_sources',
    async up(db) {
      await sql`create table audit_sources (
        organization_uuid uuid not null,
        cloud text not null check (cloud in ('gcp')),
        settings jsonb not null,
        updated_at timestamptz not null default now(),
        primary key (organization_uuid, cloud)
      )`.execute(db);
    },
  },
];
