// Stacks, their detection runs and the drift inbox, always read within one organization. The
// inbox is written by one transaction per detection run: the items the run saw are opened (new),
// reopened (resolved before) or updated (still there); the open items it did not see are resolved.
// A run records at most once (keyed by its run id): a retried activity changes nothing.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import {
  stackScheduleSchema,
  type DetectedDrift,
  type DetectionRun,
  type DriftItem,
  type DriftItemState,
  type Stack,
  type StackSpec,
  type StackUpdate,
} from '../../stack-contracts';
import type { AuditSummary } from '../../audit-events';
import type { SessionSettings } from '../../contracts';
import { RegistryError } from './runners';
import { insertSession, legacyStateProjectId, stateProjectId, type SessionDefaults } from './sessions';
import type { Db, StacksTable } from './index';

const isUniqueViolation = (err: unknown): boolean => (err as { code?: string }).code === '23505';

function toStack(row: Omit<StacksTable, 'created_at' | 'updated_at'>): Stack {
  return {
    stack_uuid: row.stack_uuid,
    organization_uuid: row.organization_uuid,
    name: row.name,
    repository_url: row.repository_url,
    iac_path: row.iac_path,
    cloud: row.cloud as Stack['cloud'],
    scope_id: row.scope_id,
    engine: row.engine as Stack['engine'],
    branch: row.branch,
    schedule: stackScheduleSchema.parse(row.schedule),
    auto_remediate: row.auto_remediate as Stack['auto_remediate'],
    created_by: row.created_by,
    remediation_session_id: row.remediation_session_id,
    state_project_id: stackStateProjectId(row),
  };
}

/** A stack's state project id: the one stored at creation, or the legacy id for older stacks. */
export function stackStateProjectId(
  row: Pick<StacksTable, 'state_project_id' | 'repository_url' | 'iac_path' | 'scope_id'>,
): string {
  return row.state_project_id ?? legacyStateProjectId(row.repository_url, row.iac_path, row.scope_id);
}

const STACK_COLUMNS = [
  'stack_uuid',
  'organization_uuid',
  'name',
  'repository_url',
  'iac_path',
  'cloud',
  'scope_id',
  'engine',
  'branch',
  'schedule',
  'auto_remediate',
  'created_by',
  'remediation_session_id',
  'state_project_id',
] as const;

export async function createStack(
  db: Db,
  organization_uuid: string,
  spec: StackSpec,
  created_by: string | null = null,
): Promise<Stack> {
  const row = {
    stack_uuid: randomUUID(),
    organization_uuid,
    name: spec.name,
    repository_url: spec.repository_url,
    iac_path: spec.iac_path ?? '',
    cloud: spec.cloud,
    scope_id: spec.scope_id,
    engine: spec.engine ?? 'terraform',
    branch: spec.branch ?? '',
    schedule: JSON.stringify(spec.schedule),
    auto_remediate: spec.auto_remediate ?? 'off',
    created_by,
    remediation_session_id: null,
    state_project_id: stateProjectId(
      organization_uuid,
      spec.repository_url,
      spec.iac_path ?? '',
      spec.scope_id,
    ),
  };
  try {
    await db.insertInto('stacks').values(row).execute();
  } catch (err) {
    if (isUniqueViolation(err))
      throw new RegistryError('conflict', `A stack named ${spec.name} already exists.`);
    throw err;
  }
  return toStack({ ...row, schedule: spec.schedule });
}

/** A stack of the organization; `undefined` organization: any (the detection workflow's own read). */
export async function getStack(db: Db, stack_uuid: string, organization_uuid?: string): Promise<Stack> {
  let q = db.selectFrom('stacks').select(STACK_COLUMNS).where('stack_uuid', '=', stack_uuid);
  if (organization_uuid) q = q.where('organization_uuid', '=', organization_uuid);
  const row = await q.executeTakeFirst();
  if (!row) throw new RegistryError('not_found', `Stack ${stack_uuid} not found.`);
  return toStack(row);
}

export async function listStacks(db: Db, organization_uuid: string): Promise<Stack[]> {
  const rows = await db
    .selectFrom('stacks')
    .select(STACK_COLUMNS)
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('name')
    .execute();
  return rows.map(toStack);
}

export async function updateStack(
  db: Db,
  organization_uuid: string,
  stack_uuid: string,
  change: StackUpdate,
): Promise<Stack> {
  const set: Record<string, unknown> = { updated_at: sql`now()` };
  for (const [k, v] of Object.entries(change)) {
    if (v !== undefined) set[k] = k === 'schedule' ? JSON.stringify(v) : v;
  }
  const r = await db
    .updateTable('stacks')
    .set(set as never)
    .where('stack_uuid', '=', stack_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (Number(r.numUpdatedRows) === 0) throw new RegistryError('not_found', `Stack ${stack_uuid} not found.`);
  return getStack(db, stack_uuid, organization_uuid);
}

export async function deleteStack(db: Db, organization_uuid: string, stack_uuid: string): Promise<void> {
  const r = await db
    .deleteFrom('stacks')
    .where('stack_uuid', '=', stack_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (Number(r.numDeletedRows) === 0) throw new RegistryError('not_found', `Stack ${stack_uuid} not found.`);
}

/** A run begins (idempotent: a retry of the same run id changes nothing). */
export async function startDetectionRun(db: Db, stack_uuid: string, run_id: string): Promise<void> {
  await db
    .insertInto('detection_runs')
    .values({
      run_id,
      stack_uuid,
      status: 'running',
      finished_at: null,
      plan_key: null,
      report_key: null,
      error: null,
    })
    .onConflict((oc) => oc.column('run_id').doNothing())
    .execute();
}

/** A run failed: recorded, and the inbox left as it was. */
export async function failDetectionRun(db: Db, run_id: string, error: string): Promise<void> {
  await db
    .updateTable('detection_runs')
    .set({ status: 'failed', error: error.slice(0, 2000), finished_at: sql`now()` } as never)
    .where('run_id', '=', run_id)
    .where('status', '=', 'running')
    .execute();
}

export interface InboxChange {
  opened: number;
  resolved: number;
  whitelisted: number;
  /** The items this run opened (new or reopened) and resolved: what the webhooks announce. */
  openedItems: DetectedDrift[];
  resolvedItems: { address: string; attribute: string }[];
  /** False when the run had recorded before (a retry): nothing changed. */
  recorded: boolean;
}

const itemKey = (d: { address: string; attribute: string }) => `${d.address}\n${d.attribute}`;

/**
 * Records what a completed run saw: items opened, reopened or updated; open items it did not see
 * resolved. One transaction; a run that recorded before changes nothing.
 */
export async function recordDetection(
  db: Db,
  opts: {
    stack_uuid: string;
    run_id: string;
    seen: DetectedDrift[];
    drift_count: number;
    plan_key: string;
    report_key: string;
    /** A targeted run's addresses: only their open items can be resolved by it. */
    targets?: string[];
    /** The audit event behind the run: on every item it opens or sees again. */
    audit?: AuditSummary;
  },
): Promise<InboxChange> {
  return db.transaction().execute(async (trx) => {
    const run = await trx
      .selectFrom('detection_runs')
      .select(['status'])
      .where('run_id', '=', opts.run_id)
      .forUpdate()
      .executeTakeFirst();
    if (run?.status === 'completed')
      return { opened: 0, resolved: 0, whitelisted: 0, openedItems: [], resolvedItems: [], recorded: false };
    const existing = await trx
      .selectFrom('drift_items')
      .select(['drift_item_uuid', 'address', 'attribute', 'state'])
      .where('stack_uuid', '=', opts.stack_uuid)
      .execute();
    const byKey = new Map(existing.map((e) => [itemKey(e), e]));
    const seenKeys = new Set<string>();
    const openedItems: DetectedDrift[] = [];
    for (const d of opts.seen) {
      const k = itemKey(d);
      if (seenKeys.has(k)) continue;
      seenKeys.add(k);
      const before = byKey.get(k);
      const whitelisted = d.rule_id !== undefined;
      const values = {
        declared: d.declared === undefined || d.declared === null ? null : JSON.stringify(d.declared),
        actual: d.actual === undefined || d.actual === null ? null : JSON.stringify(d.actual),
        note: d.note ?? null,
      };
      if (!before) {
        const row = {
          drift_item_uuid: randomUUID(),
          stack_uuid: opts.stack_uuid,
          address: d.address,
          attribute: d.attribute,
          action: d.action,
          state: 'open',
          whitelisted,
          rule_id: d.rule_id ?? null,
          resolved_at: null,
          first_run_id: opts.run_id,
          last_run_id: opts.run_id,
          resolved_run_id: null,
          ...values,
          audit: opts.audit ? JSON.stringify(opts.audit) : null,
        };
        await trx.insertInto('drift_items').values(row).execute();
        openedItems.push(d);
      } else {
        const reopened = before.state === 'resolved';
        await trx
          .updateTable('drift_items')
          .set({
            state: 'open',
            action: d.action,
            whitelisted,
            rule_id: d.rule_id ?? null,
            ...values,
            last_seen_at: sql`now()`,
            last_run_id: opts.run_id,
            // Who made the change stays on the item until another event says otherwise.
            ...(opts.audit ? { audit: JSON.stringify(opts.audit) } : reopened ? { audit: null } : {}),
            ...(reopened
              ? {
                  first_seen_at: sql`now()`,
                  first_run_id: opts.run_id,
                  runs_seen: 1,
                  resolved_at: null,
                  resolved_run_id: null,
                }
              : { runs_seen: sql`runs_seen + 1` }),
          } as never)
          .where('drift_item_uuid', '=', before.drift_item_uuid)
          .execute();
        if (reopened) openedItems.push(d);
      }
    }
    // A target names a resource, an instance of it (`[…]`) or a module (`.…`): what -target plans.
    const inScope = (address: string) =>
      !opts.targets ||
      opts.targets.some((t) => address === t || address.startsWith(`${t}.`) || address.startsWith(`${t}[`));
    const resolvedItems = existing.filter(
      (e) => e.state === 'open' && !seenKeys.has(itemKey(e)) && inScope(e.address),
    );
    if (resolvedItems.length > 0) {
      await trx
        .updateTable('drift_items')
        .set({ state: 'resolved', resolved_at: sql`now()`, resolved_run_id: opts.run_id } as never)
        .where(
          'drift_item_uuid',
          'in',
          resolvedItems.map((e) => e.drift_item_uuid),
        )
        .execute();
    }
    const whitelisted = opts.seen.filter((d) => d.rule_id !== undefined).length;
    const counts = {
      opened: openedItems.filter((d) => d.rule_id === undefined).length,
      resolved: resolvedItems.length,
      whitelisted,
    };
    const done = {
      status: 'completed',
      finished_at: sql`now()` as never,
      drift_count: opts.drift_count,
      ...counts,
      plan_key: opts.plan_key,
      report_key: opts.report_key,
      error: null,
    };
    await trx
      .insertInto('detection_runs')
      .values({ run_id: opts.run_id, stack_uuid: opts.stack_uuid, ...done })
      .onConflict((oc) => oc.column('run_id').doUpdateSet(done))
      .execute();
    return {
      ...counts,
      openedItems,
      resolvedItems: resolvedItems.map((e) => ({ address: e.address, attribute: e.attribute })),
      recorded: true,
    };
  });
}

/**
 * What the stack's state holds, by cloud id (cloudIdsOfState), as its latest detection saw it:
 * replaces the stack's previous index in one transaction.
 */
export async function replaceStackCloudIds(
  db: Db,
  stack: { stack_uuid: string; organization_uuid: string },
  index: Map<string, string[]>,
): Promise<void> {
  const rows = [...index].flatMap(([cloud_id, addresses]) =>
    addresses.map((address) => ({
      stack_uuid: stack.stack_uuid,
      organization_uuid: stack.organization_uuid,
      cloud_id,
      address,
    })),
  );
  await db.transaction().execute(async (tx) => {
    await tx.deleteFrom('stack_cloud_ids').where('stack_uuid', '=', stack.stack_uuid).execute();
    for (let i = 0; i < rows.length; i += 1000)
      await tx
        .insertInto('stack_cloud_ids')
        .values(rows.slice(i, i + 1000))
        .onConflict((oc) => oc.doNothing())
        .execute();
  });
}

/** The organization's stacks and addresses that hold resources of these cloud ids. */
export async function findByCloudIds(
  db: Db,
  organization_uuid: string,
  cloud_ids: string[],
): Promise<{ stack_uuid: string; cloud_id: string; address: string }[]> {
  if (cloud_ids.length === 0) return [];
  return db
    .selectFrom('stack_cloud_ids')
    .select(['stack_uuid', 'cloud_id', 'address'])
    .where('organization_uuid', '=', organization_uuid)
    .where('cloud_id', 'in', cloud_ids)
    .orderBy('stack_uuid')
    .orderBy('address')
    .execute();
}

export async function listDetectionRuns(db: Db, stack_uuid: string, limit = 50): Promise<DetectionRun[]> {
  const rows = await db
    .selectFrom('detection_runs')
    .selectAll()
    .where('stack_uuid', '=', stack_uuid)
    .orderBy('started_at', 'desc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    ...r,
    status: r.status as DetectionRun['status'],
    started_at: new Date(r.started_at).toISOString(),
    finished_at: r.finished_at ? new Date(r.finished_at).toISOString() : null,
  }));
}

/** The organization's drift inbox, newest first; filters by stack, state and cloud. */
export async function listDriftItems(
  db: Db,
  organization_uuid: string,
  filter: { stack_uuid?: string; state?: DriftItemState; cloud?: string; ids?: string[] } = {},
): Promise<DriftItem[]> {
  let q = db
    .selectFrom('drift_items')
    .innerJoin('stacks', 'stacks.stack_uuid', 'drift_items.stack_uuid')
    .select([
      'drift_items.drift_item_uuid',
      'drift_items.stack_uuid',
      'stacks.name as stack_name',
      'stacks.cloud',
      'drift_items.address',
      'drift_items.attribute',
      'drift_items.action',
      'drift_items.state',
      'drift_items.whitelisted',
      'drift_items.rule_id',
      'drift_items.first_seen_at',
      'drift_items.last_seen_at',
      'drift_items.resolved_at',
      'drift_items.runs_seen',
      'drift_items.session_id',
      'drift_items.declared',
      'drift_items.actual',
      'drift_items.note',
      'drift_items.audit',
    ])
    .where('stacks.organization_uuid', '=', organization_uuid);
  if (filter.stack_uuid) q = q.where('drift_items.stack_uuid', '=', filter.stack_uuid);
  if (filter.state) q = q.where('drift_items.state', '=', filter.state);
  if (filter.cloud) q = q.where('stacks.cloud', '=', filter.cloud);
  if (filter.ids) q = q.where('drift_items.drift_item_uuid', 'in', filter.ids.length ? filter.ids : ['']);
  const rows = await q.orderBy('drift_items.last_seen_at', 'desc').limit(1000).execute();
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return rows.map((r) => ({
    ...r,
    state: r.state as DriftItemState,
    first_seen_at: iso(r.first_seen_at) as string,
    last_seen_at: iso(r.last_seen_at) as string,
    resolved_at: iso(r.resolved_at),
    audit: (r.audit as AuditSummary | null) ?? null,
  }));
}

/** What a stack's auto-remediation did with a run's new items. */
export type RemediationClaim =
  { opened: true; settings: SessionSettings } | { opened: false; reason: string; session_id?: string };

/**
 * A run's auto-remediation session, claimed in one transaction with the stack row locked: none when
 * the session the stack opened last is still ACTIVE (at most one open at a time) or nobody is on
 * record to own it; else the session's row, the stack pointing at it, the run and the items naming
 * it. The same claim again (a retried activity) answers the same and changes nothing.
 */
export async function claimRemediation(
  db: Db,
  input: {
    stack_uuid: string;
    run_id: string;
    session_id: string;
    items: { address: string; attribute: string }[];
    defaults: SessionDefaults;
  },
): Promise<RemediationClaim> {
  return db.transaction().execute(async (trx) => {
    const stack = await trx
      .selectFrom('stacks')
      .select(STACK_COLUMNS)
      .where('stack_uuid', '=', input.stack_uuid)
      .forUpdate()
      .executeTakeFirst();
    if (!stack) return { opened: false, reason: `Stack ${input.stack_uuid} no longer exists.` };
    const again = stack.remediation_session_id === input.session_id;
    if (stack.remediation_session_id && !again) {
      const last = await trx
        .selectFrom('sessions')
        .select('status')
        .where('session_id', '=', stack.remediation_session_id)
        .executeTakeFirst();
      if (last?.status === 'ACTIVE')
        return {
          opened: false,
          reason: `Session ${stack.remediation_session_id} is still open for this stack.`,
          session_id: stack.remediation_session_id,
        };
    }
    if (!stack.created_by)
      return { opened: false, reason: 'Nobody who registered the stack is on record to own its session.' };
    const settings = await insertSession(
      trx,
      {
        session_id: input.session_id,
        organization_uuid: stack.organization_uuid,
        created_by: stack.created_by,
        repository_url: stack.repository_url,
        cloud: stack.cloud as SessionSettings['cloud'],
        scope_id: stack.scope_id,
        iac_path: stack.iac_path,
        state_project_id: stackStateProjectId(stack),
      },
      input.defaults,
    );
    if (!again) {
      await trx
        .updateTable('stacks')
        .set({ remediation_session_id: input.session_id })
        .where('stack_uuid', '=', input.stack_uuid)
        .execute();
      await trx
        .updateTable('detection_runs')
        .set({ session_id: input.session_id })
        .where('run_id', '=', input.run_id)
        .execute();
      await linkItems(trx, input.stack_uuid, input.items, input.session_id);
    }
    return { opened: true, settings };
  });
}

/** The open items named (by address and attribute) get the session opened for them. */
export async function linkItems(
  db: Db,
  stack_uuid: string,
  items: { address: string; attribute: string }[],
  session_id: string,
): Promise<void> {
  if (items.length === 0) return;
  await db
    .updateTable('drift_items')
    .set({ session_id })
    .where('stack_uuid', '=', stack_uuid)
    .where('state', '=', 'open')
    .where((eb) =>
      eb.or(items.map((i) => eb.and([eb('address', '=', i.address), eb('attribute', '=', i.attribute)]))),
    )
    .execute();
}
