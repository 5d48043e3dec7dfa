// Browser sessions: a user's token exchanged once for a random session id that lives only in an
// httpOnly cookie (an EventSource cannot send a header, and script must never read a credential).
// The store keeps the id's hash; signing out revokes it; a session expires after its lifetime.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from './index';
import { hashToken, type User } from './users';

/** How long a browser session lasts without signing in again. */
export const AUTH_SESSION_HOURS = 12;

export async function createAuthSession(db: Db, user: User): Promise<{ id: string; expiresAt: Date }> {
  const id = `kss_${randomBytes(32).toString('base64url')}`;
  const expiresAt = new Date(Date.now() + AUTH_SESSION_HOURS * 3600_000);
  await db
    .insertInto('auth_sessions')
    .values({
      session_sha256: hashToken(id),
      user_uuid: user.user_uuid,
      expires_at: expiresAt,
      revoked_at: null,
    })
    .execute();
  return { id, expiresAt };
}

/** The user of a live (not revoked, not expired) session. */
export async function findUserByAuthSession(db: Db, id: string): Promise<User | undefined> {
  return db
    .selectFrom('auth_sessions')
    .innerJoin('users', 'users.user_uuid', 'auth_sessions.user_uuid')
    .select(['users.user_uuid', 'users.name', 'users.role', 'users.organization_uuid'])
    .where('auth_sessions.session_sha256', '=', hashToken(id))
    .where('auth_sessions.revoked_at', 'is', null)
    .where('users.revoked_at', 'is', null)
    .where('auth_sessions.expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
}

export async function revokeAuthSession(db: Db, id: string): Promise<void> {
  await db
    .updateTable('auth_sessions')
    .set({ revoked_at: sql`now()` })
    .where('session_sha256', '=', hashToken(id))
    .execute();
}
