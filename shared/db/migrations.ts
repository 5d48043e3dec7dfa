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
];
