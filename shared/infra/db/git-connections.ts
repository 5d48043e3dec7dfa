// Repository connections (issue 26 item 1): the git hosts an organization's sessions and stacks
// may name. A repository URL is accepted only when its origin is one of its organization's
// connections; git sends the connection's credential (sealed here, opened by the worker) to that
// origin only. Always read within one organization.
import { randomUUID } from 'node:crypto';
import type { SecretBox } from '../secret-box';
import type { Db, GitConnectionsTable } from './index';

export type GitConnectionKind = GitConnectionsTable['kind'];

/** What a route shows of a connection: never the credential, only whether there is one. */
export interface GitConnectionView {
  git_connection_uuid: string;
  origin: string;
  kind: GitConnectionKind;
  has_credential: boolean;
  created_at: Date;
}

/** `https://host[:port]` of a repository URL (undefined when it is not a URL). */
export function repositoryOrigin(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** What a sealed credential is bound to: its organization and origin. */
const boundTo = (organization_uuid: string, origin: string) => `git:${organization_uuid}:${origin}`;

const isUniqueViolation = (err: unknown): boolean => (err as { code?: string }).code === '23505';

export class GitConnectionConflict extends Error {}

export async function createGitConnection(
  db: Db,
  input: {
    organization_uuid: string;
    origin: string;
    kind: GitConnectionKind;
    credential?: string | undefined;
    created_by?: string | undefined;
    box?: SecretBox | undefined;
  },
): Promise<GitConnectionView> {
  if (input.credential !== undefined && !input.box) throw new Error('a credential needs a secret box');
  const row = {
    git_connection_uuid: randomUUID(),
    organization_uuid: input.organization_uuid,
    origin: input.origin,
    kind: input.kind,
    credential_sealed:
      input.credential !== undefined && input.box
        ? input.box.seal(input.credential, boundTo(input.organization_uuid, input.origin))
        : null,
    created_by: input.created_by ?? null,
  };
  try {
    const saved = await db
      .insertInto('git_connections')
      .values(row)
      .returning('created_at')
      .executeTakeFirstOrThrow();
    return view({ ...row, created_at: saved.created_at });
  } catch (err) {
    if (isUniqueViolation(err))
      throw new GitConnectionConflict(`${input.origin} is already a git connection of this organization.`);
    throw err;
  }
}

/** Registers `origin` for the organization unless it is already (no credential): idempotent. */
export async function ensureGitConnection(
  db: Db,
  organization_uuid: string,
  origin: string,
  kind: GitConnectionKind,
): Promise<void> {
  await db
    .insertInto('git_connections')
    .values({
      git_connection_uuid: randomUUID(),
      organization_uuid,
      origin: new URL(origin).origin,
      kind,
      credential_sealed: null,
      created_by: null,
    })
    .onConflict((oc) => oc.columns(['organization_uuid', 'origin']).doNothing())
    .execute();
}

function view(
  row: Pick<GitConnectionsTable, 'git_connection_uuid' | 'origin' | 'kind' | 'credential_sealed'> & {
    created_at: Date;
  },
): GitConnectionView {
  return {
    git_connection_uuid: row.git_connection_uuid,
    origin: row.origin,
    kind: row.kind,
    has_credential: row.credential_sealed !== null,
    created_at: row.created_at,
  };
}

export async function listGitConnections(db: Db, organization_uuid: string): Promise<GitConnectionView[]> {
  const rows = await db
    .selectFrom('git_connections')
    .select(['git_connection_uuid', 'origin', 'kind', 'credential_sealed', 'created_at'])
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('origin')
    .execute();
  return rows.map(view);
}

/** Removes one of the organization's connections; false when it has none by that id. */
export async function deleteGitConnection(
  db: Db,
  organization_uuid: string,
  git_connection_uuid: string,
): Promise<boolean> {
  const r = await db
    .deleteFrom('git_connections')
    .where('organization_uuid', '=', organization_uuid)
    .where('git_connection_uuid', '=', git_connection_uuid)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** The organization's connection for a repository URL's origin, if it has one. */
export async function gitConnectionFor(
  db: Db,
  organization_uuid: string,
  repositoryUrl: string,
): Promise<Pick<GitConnectionsTable, 'origin' | 'kind' | 'credential_sealed'> | undefined> {
  const origin = repositoryOrigin(repositoryUrl);
  if (!origin) return undefined;
  return db
    .selectFrom('git_connections')
    .select(['origin', 'kind', 'credential_sealed'])
    .where('organization_uuid', '=', organization_uuid)
    .where('origin', '=', origin)
    .executeTakeFirst();
}

/** Opens a connection's sealed credential (the worker, for the one git call that needs it). */
export function openGitCredential(
  box: SecretBox,
  organization_uuid: string,
  connection: Pick<GitConnectionsTable, 'origin' | 'credential_sealed'>,
): string | undefined {
  if (!connection.credential_sealed) return undefined;
  return box.open(connection.credential_sealed, boundTo(organization_uuid, connection.origin));
}
