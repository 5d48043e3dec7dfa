// Leases on Kumoss-managed states (activities/managed-state.ts): one row per state project id. A
// hold is taken when the row is free, expired, or already this holder's; it is renewed while the
// engine runs and deleted when it ends. The database's clock decides expiry, so workers whose
// clocks differ agree on it.
import { sql } from 'kysely';
import type { Db } from './index';

export type LeaseAttempt = { acquired: true } | { acquired: false; operation: string; expiresAt: Date };

/** Takes the lease of `stateProjectId` for `holder` unless someone else holds an unexpired one. */
export async function tryAcquireStateLock(
  db: Db,
  stateProjectId: string,
  holder: string,
  operation: string,
  ttlMs: number,
): Promise<LeaseAttempt> {
  const ttl = sql`now() + ${ttlMs} * interval '1 millisecond'`;
  const taken = await db
    .insertInto('state_locks')
    .values({
      state_project_id: stateProjectId,
      holder,
      operation,
      acquired_at: sql<Date>`now()`,
      expires_at: sql<Date>`${ttl}`,
    })
    .onConflict((oc) =>
      oc
        .column('state_project_id')
        .doUpdateSet({
          holder,
          operation,
          acquired_at: sql<Date>`now()`,
          expires_at: sql<Date>`${ttl}`,
        })
        .where((eb) =>
          eb.or([eb('state_locks.expires_at', '<', sql<Date>`now()`), eb('state_locks.holder', '=', holder)]),
        ),
    )
    .returning('holder')
    .executeTakeFirst();
  if (taken?.holder === holder) return { acquired: true };
  const current = await db
    .selectFrom('state_locks')
    .select(['operation', 'expires_at'])
    .where('state_project_id', '=', stateProjectId)
    .executeTakeFirst();
  // Released between the two statements: the next attempt takes it.
  if (!current) return { acquired: false, operation: '(released)', expiresAt: new Date() };
  return { acquired: false, operation: current.operation, expiresAt: current.expires_at };
}

/** Extends `holder`'s lease; false when it no longer holds it (expired and taken by another). */
export async function renewStateLock(
  db: Db,
  stateProjectId: string,
  holder: string,
  ttlMs: number,
): Promise<boolean> {
  const r = await db
    .updateTable('state_locks')
    .set({ expires_at: sql<Date>`now() + ${ttlMs} * interval '1 millisecond'` })
    .where('state_project_id', '=', stateProjectId)
    .where('holder', '=', holder)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function releaseStateLock(db: Db, stateProjectId: string, holder: string): Promise<void> {
  await db
    .deleteFrom('state_locks')
    .where('state_project_id', '=', stateProjectId)
    .where('holder', '=', holder)
    .execute();
}

/** Who holds the lease of `stateProjectId` now (expired leases count as none). */
export async function currentStateLockHolder(db: Db, stateProjectId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('state_locks')
    .select('holder')
    .where('state_project_id', '=', stateProjectId)
    .where('expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
  return row?.holder;
}
