// Users, roles and organizations. Tokens are stored as SHA-256 hashes only; the token itself is
// shown once, when the user is created.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, UsersTable } from './index';

export const ROLES = ['developer', 'devops', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** developer < devops < admin */
export function roleAtLeast(role: Role, needed: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export type User = Pick<UsersTable, 'user_uuid' | 'name' | 'role' | 'organization_uuid'>;

export async function ensureOrganization(db: Db, name: string): Promise<string> {
  const found = await db
    .selectFrom('organizations')
    .select('organization_uuid')
    .where('name', '=', name)
    .executeTakeFirst();
  if (found) return found.organization_uuid;
  const id = randomUUID();
  await db
    .insertInto('organizations')
    .values({ organization_uuid: id, name })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db
    .selectFrom('organizations')
    .select('organization_uuid')
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return row.organization_uuid;
}

export async function createUser(
  db: Db,
  opts: { name: string; role: Role; organization: string },
): Promise<{ user: User; token: string }> {
  const organization_uuid = await ensureOrganization(db, opts.organization);
  return createUserInOrganization(db, { name: opts.name, role: opts.role, organization_uuid });
}

export async function createUserInOrganization(
  db: Db,
  opts: { name: string; role: Role; organization_uuid: string },
): Promise<{ user: User; token: string }> {
  const token = newToken();
  const user: User = { user_uuid: randomUUID(), ...opts };
  await db
    .insertInto('users')
    .values({ ...user, token_sha256: hashToken(token) })
    .execute();
  return { user, token };
}

export async function findUserByToken(db: Db, token: string): Promise<User | undefined> {
  return db
    .selectFrom('users')
    .select(['user_uuid', 'name', 'role', 'organization_uuid'])
    .where('token_sha256', '=', hashToken(token))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

function newToken(): string {
  return `kms_${randomBytes(24).toString('base64url')}`;
}

/** Revokes a user's token and every browser session signed in with it. */
export async function revokeUserToken(db: Db, userUuid: string): Promise<void> {
  await db.transaction().execute(async (tx) => {
    // The old hash is replaced too, so the revoked token can never match again.
    await tx
      .updateTable('users')
      .set({ revoked_at: sql`now()`, token_sha256: hashToken(newToken()) })
      .where('user_uuid', '=', userUuid)
      .execute();
    await tx
      .updateTable('auth_sessions')
      .set({ revoked_at: sql`now()` })
      .where('user_uuid', '=', userUuid)
      .where('revoked_at', 'is', null)
      .execute();
  });
}

/** Issues a new token for a user (the old one and its browser sessions stop working); shown once. */
export async function issueUserToken(db: Db, userUuid: string): Promise<string> {
  const token = newToken();
  await db.transaction().execute(async (tx) => {
    await tx
      .updateTable('users')
      .set({ revoked_at: null, token_sha256: hashToken(token) })
      .where('user_uuid', '=', userUuid)
      .execute();
    await tx
      .updateTable('auth_sessions')
      .set({ revoked_at: sql`now()` })
      .where('user_uuid', '=', userUuid)
      .where('revoked_at', 'is', null)
      .execute();
  });
  return token;
}

/** The organization's users for the admin panel (never a token hash). */
export function listUsers(db: Db, organizationUuid: string) {
  return db
    .selectFrom('users')
    .select(['user_uuid', 'name', 'role', 'created_at', 'revoked_at'])
    .where('organization_uuid', '=', organizationUuid)
    .orderBy('name')
    .execute();
}

/** A user of the organization by id or by name, if there is one. */
export function findUserInOrganization(
  db: Db,
  organizationUuid: string,
  by: { user_uuid: string } | { name: string },
) {
  const query = db
    .selectFrom('users')
    .select(['user_uuid', 'name'])
    .where('organization_uuid', '=', organizationUuid);
  return (
    'user_uuid' in by ? query.where('user_uuid', '=', by.user_uuid) : query.where('name', '=', by.name)
  ).executeTakeFirst();
}

export async function setUserRole(db: Db, userUuid: string, role: Role): Promise<void> {
  await db.updateTable('users').set({ role }).where('user_uuid', '=', userUuid).execute();
}
