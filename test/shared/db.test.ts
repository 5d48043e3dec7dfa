// The metadata store over the PostgreSQL wire protocol (PGlite served on loopback).
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedDatabase } from '../../scripts/embedded/database';
import { createDb, migrate, type Db } from '../../shared/db';
import { migrations } from '../../shared/db/migrations';
import { stack } from '../support/stack';

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
    const fresh = await startEmbeddedDatabase({});
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
    const fresh = await startEmbeddedDatabase({});
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
});
