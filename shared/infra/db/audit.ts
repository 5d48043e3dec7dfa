// Cloud audit events in the metadata store (issue 30): each organization's ingestion secret, kept as
// its SHA-256 (shown once, compared in constant time), and the changes its endpoint accepted — with
// the stacks and addresses they touched, or none (the unmanaged-change feed).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { AuditChange, AuditChangeView, GcpAuditSource } from '../../audit-events';
import type { Db } from './index';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** A new ingestion secret for the organization (the old one stops working); returned once. */
export async function rotateIngestionSecret(db: Db, organization_uuid: string): Promise<string> {
  const secret = `kis_${randomBytes(32).toString('base64url')}`;
  const secret_sha256 = sha256(secret).toString('hex');
  await db
    .insertInto('ingestion_secrets')
    .values({ organization_uuid, secret_sha256 })
    .onConflict((oc) => oc.column('organization_uuid').doUpdateSet({ secret_sha256, created_at: sql`now()` }))
    .execute();
  return secret;
}

/** Whether `given` is the organization's ingestion secret (false when it has none). */
export async function ingestionSecretMatches(
  db: Db,
  organization_uuid: string,
  given: string | undefined,
): Promise<boolean> {
  const row = await db
    .selectFrom('ingestion_secrets')
    .select('secret_sha256')
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  const want = Buffer.from(row?.secret_sha256 ?? '00'.repeat(32), 'hex');
  const ok = timingSafeEqual(sha256(given ?? ''), want);
  return ok && row !== undefined && given !== undefined && given.length > 0;
}

/**
 * Records the changes with what they touched; answers the event ids recorded now (a change seen
 * before — a delivery repeated — is not recorded again and starts nothing again).
 */
export async function recordAuditChanges(
  db: Db,
  organization_uuid: string,
  changes: { change: AuditChange; stacks: { stack_uuid: string; addresses: string[] }[] }[],
): Promise<Set<string>> {
  if (changes.length === 0) return new Set();
  const rows = await db
    .insertInto('audit_changes')
    .values(
      changes.map(({ change: c, stacks }) => ({
        organization_uuid,
        event_id: c.event_id,
        cloud: c.cloud,
        actor: c.actor,
        at: c.time,
        action: c.action,
        source_address: c.source_address,
        resource_ids: JSON.stringify(c.resource_ids),
        stacks: JSON.stringify(stacks),
      })),
    )
    .onConflict((oc) => oc.columns(['organization_uuid', 'event_id']).doNothing())
    .returning('event_id')
    .execute();
  return new Set(rows.map((r) => r.event_id));
}

/** The organization's accepted changes, newest first; `unmanaged`: only those no stack holds. */
export async function listAuditChanges(
  db: Db,
  organization_uuid: string,
  opts: { unmanaged?: boolean; stack_uuid?: string; limit: number },
): Promise<AuditChangeView[]> {
  let q = db.selectFrom('audit_changes').selectAll().where('organization_uuid', '=', organization_uuid);
  if (opts.unmanaged !== undefined)
    q = q.where(sql<boolean>`(jsonb_array_length(stacks) = 0) = ${opts.unmanaged}`);
  if (opts.stack_uuid)
    q = q.where(sql<boolean>`stacks @> ${JSON.stringify([{ stack_uuid: opts.stack_uuid }])}::jsonb`);
  const rows = await q.orderBy('received_at', 'desc').orderBy('event_id').limit(opts.limit).execute();
  return rows.map((r) => ({
    event_id: r.event_id,
    cloud: r.cloud,
    actor: r.actor,
    at: new Date(r.at).toISOString(),
    action: r.action,
    source_address: r.source_address,
    resource_ids: r.resource_ids as string[],
    stacks: r.stacks as AuditChangeView['stacks'],
    received_at: new Date(r.received_at).toISOString(),
  }));
}

/** How long after a round ended a change by its role session still counts as the round's own. */
export const OWN_RUN_GRACE_MS = 60_000;

/**
 * Whether a change is one of the organization's own runs — never by a name alone, which anyone who
 * may assume any role can choose: the actor is an assumed-role session of the role the
 * organization's AWS connection names (same account, same role), the session is named after a
 * round of a session of this organization (`kumoss-<session>-<round>`), and the change was made
 * while that round ran (from its start to a minute after its end).
 */
export async function isOwnRunChange(
  db: Db,
  organization_uuid: string,
  change: { actor: string; session_name?: string; time: string },
): Promise<boolean> {
  const m = /^kumoss-(s-[0-9a-f-]{36})-(r-[0-9a-f]{1,16})$/.exec(change.session_name ?? '');
  const who = /^arn:aws[a-z-]*:sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/.exec(change.actor);
  if (!m || !who) return false;
  const connection = await db
    .selectFrom('cloud_connections')
    .select('role_arn')
    .where('organization_uuid', '=', organization_uuid)
    .where('provider', '=', 'aws')
    .where('role_arn', 'is not', null)
    .execute();
  const ownRole = connection.some((c) => {
    const role = /^arn:aws[a-z-]*:iam::(\d{12}):role\/(?:.*\/)?([^/]+)$/.exec(c.role_arn ?? '');
    return role !== null && role[1] === who[1] && role[2] === who[2];
  });
  if (!ownRole) return false;
  const round = await db
    .selectFrom('session_rounds')
    .innerJoin('sessions', 'sessions.session_id', 'session_rounds.session_id')
    .select(['session_rounds.status', 'session_rounds.created_at', 'session_rounds.updated_at'])
    .where('session_rounds.session_id', '=', m[1] as string)
    .where('session_rounds.round_id', '=', m[2] as string)
    .where('sessions.organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (!round) return false;
  const at = Date.parse(change.time);
  if (!Number.isFinite(at)) return false;
  const ended = ['completed', 'uncompleted', 'failed'].includes(round.status);
  const until = (ended ? new Date(round.updated_at).getTime() : Date.now()) + OWN_RUN_GRACE_MS;
  // An event's time has whole seconds.
  return at >= new Date(round.created_at).getTime() - 1000 && at <= until;
}

/** Sets where the organization's GCP audit events come from (its push subscription's identity). */
export async function setGcpAuditSource(
  db: Db,
  organization_uuid: string,
  source: GcpAuditSource,
): Promise<void> {
  await db
    .insertInto('audit_sources')
    .values({ organization_uuid, cloud: 'gcp', settings: JSON.stringify(source) })
    .onConflict((oc) =>
      oc
        .columns(['organization_uuid', 'cloud'])
        .doUpdateSet({ settings: JSON.stringify(source), updated_at: sql`now()` }),
    )
    .execute();
}

/** The organization's GCP audit source, or undefined when it has none. */
export async function gcpAuditSource(db: Db, organization_uuid: string): Promise<GcpAuditSource | undefined> {
  const row = await db
    .selectFrom('audit_sources')
    .select('settings')
    .where('organization_uuid', '=', organization_uuid)
    .where('cloud', '=', 'gcp')
    .executeTakeFirst();
  return row?.settings as GcpAuditSource | undefined;
}
