// The metadata store on a real PostgreSQL server: the run's, and the launcher's embedded one.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedDatabase } from '../../../scripts/embedded/database';
import { freePort } from '../../../scripts/embedded/ports';
import { createDb, migrate, type Db } from '../../../shared/infra/db';
import { migrations } from '../../../shared/infra/db/migrations';
import { stack } from '../../support/stack';

/** A new empty database owned by the run's `kumoss` role, on the run's server. */
async function freshDatabase(): Promise<{ url: string; close: () => Promise<void> }> {
  const name = `kumoss_fresh_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: stack().postgresUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} owner kumoss`);
  } finally {
    await admin.end();
  }
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    close: async () => {
      const c = new pg.Client({ connectionString: stack().postgresUrl });
      await c.connect();
      await c.query(`drop database ${name} with (force)`).finally(() => c.end());
    },
  };
}

describe('metadata store', () => {
  let db: Db;
  beforeAll(() => {
    db = createDb(stack().databaseUrl);
  });
  afterAll(async () => {
    await db.destroy();
  });

  it('applies migrations once; a second run applies none', async () => {
    await migrate(db);
    expect(await migrate(db)).toEqual([]);
    const names = (await db.selectFrom('kumoss_schema_migrations').select('name').execute()).map(
      (r) => r.name,
    );
    expect(names).toContain('0001_organizations_and_users');
  });

  it("adopts the log of a database migrated before Kysely's Migrator: only the later migrations run", async () => {
    const fresh = await freshDatabase();
    const old = createDb(fresh.url);
    try {
      // The earlier migrator's way: its own log table, the first five migrations applied.
      await sql`create table kumoss_migrations (id text primary key, applied_at timestamptz not null default now())`.execute(
        old,
      );
      for (const m of migrations.slice(0, 5)) {
        await m.up(old);
        await old.insertInto('kumoss_migrations').values({ id: m.id }).execute();
      }
      expect(await migrate(old)).toEqual(migrations.slice(5).map((m) => m.id));
      const names = (
        await old.selectFrom('kumoss_schema_migrations').select('name').orderBy('name').execute()
      ).map((r) => r.name);
      expect(names).toEqual(migrations.map((m) => m.id));
      expect(await migrate(old)).toEqual([]);
    } finally {
      await old.destroy();
      await fresh.close();
    }
  });

  it('several processes migrating a fresh database at once: each migration applied once, none fails', async () => {
    const fresh = await freshDatabase();
    const clients = Array.from({ length: 4 }, () => createDb(fresh.url));
    try {
      const results = await Promise.all(clients.map((c) => migrate(c)));
      const applied = results.flat().sort();
      expect(applied).toEqual(migrations.map((m) => m.id).sort());
      const names = (await clients[0]!.selectFrom('kumoss_schema_migrations').select('name').execute()).map(
        (r) => r.name,
      );
      expect(names.sort()).toEqual(migrations.map((m) => m.id).sort());
    } finally {
      await Promise.all(clients.map((c) => c.destroy()));
      await fresh.close();
    }
  });

  it('stores an organization and a user, and enforces the role check', async () => {
    await migrate(db);
    const org = randomUUID();
    await db
      .insertInto('organizations')
      .values({ organization_uuid: org, name: `org-${org}` })
      .execute();
    await db
      .insertInto('users')
      .values({
        user_uuid: randomUUID(),
        name: `u-${org}`,
        role: 'devops',
        organization_uuid: org,
        token_sha256: org,
      })
      .execute();
    const users = await db.selectFrom('users').selectAll().where('organization_uuid', '=', org).execute();
    expect(users.map((u) => u.role)).toEqual(['devops']);
    await expect(
      db
        .insertInto('users')
        .values({
          user_uuid: randomUUID(),
          name: `v-${org}`,
          role: 'root' as 'admin',
          organization_uuid: org,
          token_sha256: `x${org}`,
        })
        .execute(),
    ).rejects.toThrow(/check constraint/);
  });

  it('one client in an open transaction does not hold up another; NOTIFY reaches a listener on another connection', async () => {
    const a = new pg.Client({ connectionString: stack().databaseUrl });
    const b = new pg.Client({ connectionString: stack().databaseUrl });
    const listener = new pg.Client({ connectionString: stack().databaseUrl });
    await Promise.all([a.connect(), b.connect(), listener.connect()]);
    try {
      const channel = `kumoss_test_${randomBytes(4).toString('hex')}`;
      await listener.query(`listen ${channel}`);
      const heard = new Promise<string | undefined>((resolve) =>
        listener.on('notification', (n) => {
          if (n.channel === channel) resolve(n.payload);
        }),
      );
      await a.query('begin');
      await a.query('select 1');
      // b answers while a's transaction is still open.
      expect((await b.query<{ n: number }>('select 2 as n')).rows[0]?.n).toBe(2);
      await a.query(`select pg_notify($1, 'from a')`, [channel]);
      await a.query('commit');
      expect(await heard).toBe('from a');
    } finally {
      await Promise.all([a.end(), b.end(), listener.end()]);
    }
  });
});

describe("the launcher's embedded PostgreSQL", () => {
  it('keeps its passwords in the data directory (0600); Kumoss connects as a role that is not a superuser; a wrong password is refused; commits reach the disk; a restart keeps the data', async () => {
    const data = mkdtempSync(join(tmpdir(), 'kumoss-embedded-db-'));
    const port = await freePort();
    try {
      const first = await startEmbeddedDatabase({ data, port });
      const secrets = join(data, 'database.json');
      expect(statSync(secrets).mode & 0o777).toBe(0o600);
      const { kumoss } = JSON.parse(readFileSync(secrets, 'utf8')) as { kumoss: string };
      expect(first.url).toBe(`postgres://kumoss:${encodeURIComponent(kumoss)}@127.0.0.1:${port}/kumoss`);
      const c = new pg.Client({ connectionString: first.url });
      await c.connect();
      const role = await c.query<{ rolsuper: boolean }>(
        'select rolsuper from pg_roles where rolname = current_user',
      );
      expect(role.rows[0]?.rolsuper).toBe(false);
      // A durable server: a commit is flushed before it is acknowledged (the test tiers' own
      // throwaway servers are not).
      const durability = await c.query<{ name: string; setting: string }>(
        "select name, setting from pg_settings where name in ('fsync', 'synchronous_commit', 'full_page_writes') order by name",
      );
      expect(durability.rows).toEqual([
        { name: 'fsync', setting: 'on' },
        { name: 'full_page_writes', setting: 'on' },
        { name: 'synchronous_commit', setting: 'on' },
      ]);
      await c.query('create table kept (v text)');
      await c.query(`insert into kept values ('still here')`);
      await c.end();
      for (const url of [
        `postgres://kumoss:wrong@127.0.0.1:${port}/kumoss`,
        `postgres://postgres@127.0.0.1:${port}/postgres`,
      ]) {
        const wrong = new pg.Client({ connectionString: url });
        await expect(wrong.connect()).rejects.toThrow(/password/);
        await wrong.end().catch(() => undefined);
      }
      await first.close();

      const second = await startEmbeddedDatabase({ data, port });
      const again = new pg.Client({ connectionString: second.url });
      await again.connect();
      expect((await again.query<{ v: string }>('select v from kept')).rows).toEqual([{ v: 'still here' }]);
      await again.end();
      await second.close();
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });
});
