// Users, roles and organizations. Tokens are stored as SHA-256 hashes only; the token itself is
// shown once, when the user is created.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
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
  const token = `kms_${randomBytes(24).toString('base64url')}`;
  const user: User = { user_uuid: randomUUID(), name: opts.name, role: opts.role, organization_uuid };
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
    .executeTakeFirst();
}
