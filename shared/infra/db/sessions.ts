// The session store: a session's status, its rounds and its ordered event log, written by the
// session and round workflows (through activities: activities/session-store.ts) and read by the
// API. A closed session workflow, or one whose history the namespace's retention dropped, is still
// fully described here.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { sql, type Transaction } from 'kysely';
import {
  pullRequestRecordSchema,
  type PinnedPlan,
  type PullRequestRecord,
  type SessionRound,
  type SessionSettings,
  type SessionStatus,
} from '../../contracts';
import { sessionBranch } from '../../ids';
import type { Database, Db } from './index';

const normalizedIacPath = (iacPath: string): string => {
  const path = posix.normalize(iacPath || '.').replace(/^\.\/+|\/+$/g, '');
  return path === '.' ? '' : path;
};

/**
 * The state project id when Kumoss manages state (activities/managed-state.ts): a hash of the
 * organization with the seed's three — repository URL, IaC path, scope id —, so two organizations
 * that name the same root and scope never share a state object or its lease. The path is normalized
 * first (`''`, `.` and `./` are the top; `envs/prod/` is `envs/prod`), so one root in one scope has
 * one state however it was named. A session stores the id it was created with and every round uses
 * that stored id.
 */
export function stateProjectId(
  organizationUuid: string,
  repositoryUrl: string,
  iacPath: string,
  scopeId: string,
): string {
  return createHash('sha256')
    .update(`org:${organizationUuid}\n${repositoryUrl}\n${normalizedIacPath(iacPath)}\n${scopeId}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * The id of the seed's three alone, without the organization: what sessions created before the
 * organization was hashed in stored (they keep it, so their state stays where it is), and what a
 * round started before then, or a `detectDrift` run started by an operator, reads.
 */
export function legacyStateProjectId(repositoryUrl: string, iacPath: string, scopeId: string): string {
  return createHash('sha256')
    .update(`${repositoryUrl}\n${normalizedIacPath(iacPath)}\n${scopeId}`)
    .digest('hex')
    .slice(0, 32);
}

/** The orchestration settings every new session takes from the configuration. */
export interface SessionDefaults {
  max_drift_reports: number;
  drift_group_operations: number;
  activity_heartbeat_seconds?: number;
  max_repair_cycles?: number;
  /** Four eyes (orchestration.apply_requires_approval): the session's workflow checks it at apply. */
  apply_requires_approval?: boolean;
}

/**
 * A new session's row, and the settings its workflow starts with; nothing is started here. An
 * insert repeated with the same session id (a retried activity) changes nothing.
 */
export async function insertSession(
  db: Db,
  s: Pick<
    SessionSettings,
    'session_id' | 'organization_uuid' | 'repository_url' | 'cloud' | 'scope_id' | 'iac_path'
  > & {
    created_by: string;
    /** The state to work on when it is not the organization's own id (a stack's legacy state). */
    state_project_id?: string;
  },
  defaults: SessionDefaults,
): Promise<SessionSettings> {
  const settings: SessionSettings = {
    session_id: s.session_id,
    organization_uuid: s.organization_uuid,
    repository_url: s.repository_url,
    cloud: s.cloud,
    scope_id: s.scope_id,
    iac_path: s.iac_path,
    state_project_id:
      s.state_project_id ?? stateProjectId(s.organization_uuid, s.repository_url, s.iac_path, s.scope_id),
    branch: sessionBranch(s.session_id),
    max_drift_reports: defaults.max_drift_reports,
    drift_group_operations: defaults.drift_group_operations,
    ...(defaults.max_repair_cycles !== undefined ? { max_repair_cycles: defaults.max_repair_cycles } : {}),
    ...(defaults.apply_requires_approval ? { apply_requires_approval: true } : {}),
    ...(defaults.activity_heartbeat_seconds
      ? { activity_heartbeat_seconds: defaults.activity_heartbeat_seconds }
      : {}),
  };
  await db
    .insertInto('sessions')
    .values({
      session_id: s.session_id,
      organization_uuid: s.organization_uuid,
      created_by: s.created_by,
      repository_url: s.repository_url,
      cloud: s.cloud,
      scope_id: s.scope_id,
      iac_path: s.iac_path,
      state_project_id: settings.state_project_id,
      branch: settings.branch,
      in_flight: null,
    })
    .onConflict((oc) => oc.column('session_id').doNothing())
    .execute();
  return settings;
}

/** One event of a session's log: a round accepted, a status change, an artifact, a refusal, … */
export interface SessionEventInput {
  /** What wrote it (`<round>:<n>`, `<round>:start`, `refused:<round>`): a retried write is a no-op. */
  source_key: string;
  round_id?: string;
  type: string;
  data: Record<string, unknown>;
  /** When it happened (the workflow's clock); default now. */
  at?: string;
}

export interface SessionEventRow {
  seq: number;
  round_id: string | null;
  type: string;
  data: Record<string, unknown>;
  at: Date;
}

export interface SessionRecord {
  sessionId: string;
  status?: SessionStatus;
  /** The operation in flight; null when none. Absent: unchanged. */
  inFlight?: { round_id: string; kind: string } | null;
  /** Rounds to insert or update (by round id). */
  rounds?: SessionRound[];
  events?: SessionEventInput[];
  /** The pinned plan: set (a generate round pinned one) or null (applied). Absent: unchanged. */
  pinnedPlan?: PinnedPlan | null;
  /** The pinned plan's lock: set with it, null to clear it (an admin's lock stays). Absent: unchanged. */
  planLock?: { reason: string; locked_by: string | null } | null;
}

type Executor = Db | Transaction<Database>;

const UNIQUE_VIOLATION = '23505';

/**
 * The statement that appends events to a session's log, each with the next seq in the order given,
 * in one round trip: an event already written (same source_key) is skipped. Two writers racing for
 * one seq: the loser fails on the primary key and its caller writes again.
 */
function appendEventsStatement(sessionId: string, events: SessionEventInput[]) {
  const rows = JSON.stringify(
    events.map((e) => ({ ...e, round_id: e.round_id ?? null, at: e.at ?? new Date().toISOString() })),
  );
  return sql`insert into session_events (session_id, seq, source_key, round_id, type, data, at)
    select ${sessionId}, (select coalesce(max(seq), 0) from session_events where session_id = ${sessionId})
        + row_number() over (order by n), source_key, round_id, type, data, at
    from rows from (jsonb_to_recordset(${rows}::jsonb)
        as (source_key text, round_id text, type text, data jsonb, at timestamptz))
      with ordinality as g(source_key, round_id, type, data, at, n)
    where not exists (
      select 1 from session_events e where e.session_id = ${sessionId} and e.source_key = g.source_key)
    on conflict (session_id, source_key) do nothing`;
}

async function appendEvents(trx: Executor, sessionId: string, events: SessionEventInput[]): Promise<void> {
  if (events.length > 0) await appendEventsStatement(sessionId, events).execute(trx);
}

async function upsertRound(trx: Executor, sessionId: string, r: SessionRound): Promise<void> {
  const values = {
    kind: r.kind,
    text: r.text ?? null,
    status: r.status,
    workflow_id: r.workflow_id ?? null,
    outcome: r.outcome ?? null,
    summary: r.summary ?? null,
    report_key: r.report_key ?? null,
    failure_reason: r.failure_reason ?? null,
    reason: r.reason ?? null,
    commit: r.commit ?? null,
  };
  await trx
    .insertInto('session_rounds')
    .values({
      session_id: sessionId,
      round_id: r.round_id,
      position: sql<number>`(select coalesce(max(position), 0) + 1 from session_rounds where session_id = ${sessionId})`,
      ...values,
    })
    .onConflict((oc) =>
      oc.columns(['session_id', 'round_id']).doUpdateSet({ ...values, updated_at: sql`now()` }),
    )
    .execute();
}

/** The LISTEN/NOTIFY channel that says "this session's store changed" (payload: the session id). */
export const SESSION_EVENTS_CHANNEL = 'kumoss_session_events';

/**
 * Tells every API process that a session changed (its record, a lock, a pull request, an artifact);
 * inside a transaction it is delivered at commit. The API also sends USERS_CHANGED (api/auth.ts) on it.
 */
export async function notifySessionChanged(db: Executor, sessionId: string): Promise<void> {
  await sql`select pg_notify(${SESSION_EVENTS_CHANNEL}, ${sessionId})`.execute(db);
}

/** Writes what the session workflow says in one transaction; idempotent (a retry writes nothing new). */
export async function recordSession(db: Db, rec: SessionRecord): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.transaction().execute(async (trx) => {
        for (const r of rec.rounds ?? []) await upsertRound(trx, rec.sessionId, r);
        if (rec.status !== undefined || rec.inFlight !== undefined) {
          await trx
            .updateTable('sessions')
            .set({
              ...(rec.status !== undefined ? { status: rec.status } : {}),
              ...(rec.inFlight !== undefined
                ? { in_flight: rec.inFlight === null ? null : JSON.stringify(rec.inFlight) }
                : {}),
              updated_at: sql`now()`,
            } as never)
            .where('session_id', '=', rec.sessionId)
            .execute();
        }
        if (rec.pinnedPlan !== undefined) {
          await trx
            .updateTable('sessions')
            .set({ pinned_plan: rec.pinnedPlan === null ? null : JSON.stringify(rec.pinnedPlan) } as never)
            .where('session_id', '=', rec.sessionId)
            .execute();
        }
        if (rec.planLock === null) {
          await trx
            .deleteFrom('session_locks')
            .where('session_id', '=', rec.sessionId)
            .where('kind', '=', 'plan')
            .execute();
        } else if (rec.planLock !== undefined) {
          // An admin's lock is never replaced by a plan's.
          await trx
            .insertInto('session_locks')
            .values({
              session_id: rec.sessionId,
              locked_by: rec.planLock.locked_by,
              reason: rec.planLock.reason,
              kind: 'plan',
            })
            .onConflict((oc) =>
              oc
                .column('session_id')
                .doUpdateSet({ reason: rec.planLock?.reason ?? '', locked_at: sql`now()` })
                .where('session_locks.kind', '=', 'plan'),
            )
            .execute();
        }
        await appendEvents(trx, rec.sessionId, rec.events ?? []);
        // Wakes the event streams of this session in every API process (delivered at commit).
        await notifySessionChanged(trx, rec.sessionId);
      });
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== UNIQUE_VIOLATION || attempt >= 20) throw err;
    }
  }
}

/**
 * Appends events only (a round's status changes and artifacts) and notifies, in one statement: one
 * round trip to the store however many events, so a round's next event is not held back by a
 * transaction's worth of them (docs/benchmarks.md, the SSE delay by segment). Events already
 * written (same source_key) are skipped; the rest take the next seqs in the order given. Two writers
 * racing for one seq: the loser fails on the primary key and writes again.
 */
export async function recordEvents(db: Db, sessionId: string, events: SessionEventInput[]): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await sql`with appended as (${appendEventsStatement(sessionId, events)})
        select pg_notify(${SESSION_EVENTS_CHANNEL}, ${sessionId})`.execute(db);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== UNIQUE_VIOLATION || attempt >= 20) throw err;
    }
  }
}

/** A session's rounds in the order it accepted them. */
export async function sessionRounds(db: Db, sessionId: string): Promise<SessionRound[]> {
  const rows = await db
    .selectFrom('session_rounds')
    .selectAll()
    .where('session_id', '=', sessionId)
    .orderBy('position')
    .execute();
  return rows.map((r) => ({
    round_id: r.round_id,
    kind: r.kind as SessionRound['kind'],
    status: r.status as SessionRound['status'],
    ...(r.text !== null ? { text: r.text } : {}),
    ...(r.workflow_id !== null ? { workflow_id: r.workflow_id } : {}),
    ...(r.outcome !== null ? { outcome: r.outcome as NonNullable<SessionRound['outcome']> } : {}),
    ...(r.summary !== null ? { summary: r.summary } : {}),
    ...(r.report_key !== null ? { report_key: r.report_key } : {}),
    ...(r.failure_reason !== null ? { failure_reason: r.failure_reason } : {}),
    ...(r.reason !== null ? { reason: r.reason } : {}),
    ...(r.commit !== null ? { commit: r.commit } : {}),
  }));
}

/** The events of a session after `seq`, oldest first, at most `limit`. */
export async function eventsAfter(
  db: Db,
  sessionId: string,
  seq: number,
  limit = 500,
): Promise<SessionEventRow[]> {
  return db
    .selectFrom('session_events')
    .select(['seq', 'round_id', 'type', 'data', 'at'])
    .where('session_id', '=', sessionId)
    .where('seq', '>', seq)
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/** The organization of a session, or undefined when the store does not know the session. */
export async function sessionOrganization(db: Db, sessionId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('sessions')
    .select('organization_uuid')
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return row?.organization_uuid;
}

/**
 * A page of an organization's sessions, newest first, each with its latest drift round's outcome;
 * `next` is the `before` of the following page (null on the last).
 */
export async function listSessions(
  db: Db,
  organizationUuid: string,
  page: { limit: number; before?: string },
) {
  let query = db
    .selectFrom('sessions')
    .select((eb) => [
      'session_id',
      'repository_url',
      'cloud',
      'scope_id',
      'iac_path',
      'status',
      'in_flight',
      'created_at',
      eb
        .selectFrom('session_rounds')
        .select('outcome')
        .whereRef('session_rounds.session_id', '=', 'sessions.session_id')
        .where('session_rounds.kind', 'in', ['partial', 'full'])
        .orderBy('session_rounds.position', 'desc')
        .limit(1)
        .as('last_outcome'),
    ])
    .where('organization_uuid', '=', organizationUuid)
    .orderBy('created_at', 'desc')
    .limit(page.limit + 1);
  if (page.before) query = query.where('created_at', '<', new Date(page.before));
  const rows = await query.execute();
  const sessions = rows.slice(0, page.limit);
  const last = sessions[sessions.length - 1];
  return {
    sessions,
    next: rows.length > page.limit && last ? new Date(last.created_at).toISOString() : null,
  };
}

/** A session's lock (`admin` or `plan`, who set it and why), if it has one. */
export function sessionLock(db: Db, sessionId: string) {
  return db
    .selectFrom('session_locks')
    .select(['reason', 'kind', 'locked_by'])
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
}

/** A session's pull request as recorded, if it has one. */
export async function sessionPullRequest(db: Db, sessionId: string): Promise<PullRequestRecord | undefined> {
  const row = await db
    .selectFrom('pull_requests')
    .select([
      'session_id',
      'provider',
      'number',
      'title',
      'description',
      'head',
      'base',
      'url',
      'status',
      'merge_commit',
    ])
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return row ? { ...row, provider: pullRequestRecordSchema.shape.provider.parse(row.provider) } : undefined;
}

/** A session's row, if the store knows it (callers check its organization). */
export function sessionRow(db: Db, sessionId: string) {
  return db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
}

/** Forgets a session whose workflow never started (its first request failed to reach Temporal). */
export async function deleteSession(db: Db, sessionId: string): Promise<void> {
  await db.deleteFrom('sessions').where('session_id', '=', sessionId).execute();
}

/** The organization's sessions for the admin panel, newest first (at most 500). */
export function adminSessions(db: Db, organizationUuid: string) {
  return db
    .selectFrom('sessions')
    .select([
      'session_id',
      'repository_url',
      'cloud',
      'iac_path',
      'status',
      'in_flight',
      'created_at',
      'updated_at',
    ])
    .where('organization_uuid', '=', organizationUuid)
    .orderBy('created_at', 'desc')
    .limit(500)
    .execute();
}

/** The locks on the organization's sessions. */
export function organizationLocks(db: Db, organizationUuid: string) {
  return db
    .selectFrom('session_locks')
    .innerJoin('sessions', 'sessions.session_id', 'session_locks.session_id')
    .select([
      'session_locks.session_id',
      'session_locks.locked_by',
      'session_locks.reason',
      'session_locks.locked_at',
    ])
    .where('sessions.organization_uuid', '=', organizationUuid)
    .execute();
}

/** An admin's lock on a session (it replaces a pinned plan's, whose apply then leaves it in place). */
export async function lockSession(
  db: Db,
  sessionId: string,
  lockedBy: string,
  reason: string,
): Promise<void> {
  await db
    .insertInto('session_locks')
    .values({ session_id: sessionId, locked_by: lockedBy, reason })
    .onConflict((oc) => oc.column('session_id').doUpdateSet({ reason, kind: 'admin', locked_by: lockedBy }))
    .execute();
  await notifySessionChanged(db, sessionId);
}

export async function unlockSession(db: Db, sessionId: string): Promise<void> {
  await db.deleteFrom('session_locks').where('session_id', '=', sessionId).execute();
  await notifySessionChanged(db, sessionId);
}

/** Records an admin's override of the pinned plan's compliance findings, and says the session changed. */
export async function recordComplianceOverride(
  db: Db,
  sessionId: string,
  override: { round_id: string; reason: string; by: string; at: string },
): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ compliance_override: JSON.stringify(override) } as never)
    .where('session_id', '=', sessionId)
    .execute();
  await notifySessionChanged(db, sessionId);
}

/** Records a second person's approval of the plan pinned now, and says the session changed. */
export async function recordPlanApproval(
  db: Db,
  sessionId: string,
  approval: { sha256: string; by: string; name: string; at: string },
): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ plan_approval: JSON.stringify(approval) } as never)
    .where('session_id', '=', sessionId)
    .execute();
  await notifySessionChanged(db, sessionId);
}
