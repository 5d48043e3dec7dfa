// The runner registry: cloud connections, runner groups, runner executions and the
// RunnerEnvironmentDriftPlan records, always read within one organization.
import { randomUUID } from 'node:crypto';
import {
  BACKEND_PROVIDER,
  runnerEnvironmentSchema,
  runnerGroupSchema,
  type BlockedResource,
  type CloudConnectionAnswer,
  type CloudConnectionSpec,
  type DriftPlanAnswer,
  type RunnerExecution,
  type RunnerGroup,
  type DriftSummary,
  type PlannedAction,
  type RunnerGroupSpec,
} from '../../runner-contracts';
import { sql } from 'kysely';
import { stackScheduleSchema, type StackSchedule } from '../../stack-contracts';
import type { SecretBox } from '../secret-box';
import type { CloudConnectionsTable, Db } from './index';

/** A connection as routes show it: its sealed credentials never, only whether it has some. */
export type CloudConnection = CloudConnectionAnswer;
export type { RunnerGroup };

export class RegistryError extends Error {
  constructor(
    readonly kind: 'not_found' | 'conflict' | 'invalid',
    message: string,
  ) {
    super(message);
  }
}

const isUniqueViolation = (err: unknown): boolean => (err as { code?: string }).code === '23505';

/** Every column of a cloud connection a route shows (not its creation time, not its credentials). */
const CONNECTION_COLUMNS = [
  'cloud_connection_uuid',
  'organization_uuid',
  'name',
  'provider',
  'region',
  'project_id',
  'account_id',
  'role_arn',
] as const;
const hasCredentials = sql<boolean>`credentials_sealed is not null`.as('has_credentials');

/** What a connection's sealed credentials are bound to: its organization and its id. */
const credentialsBoundTo = (c: { organization_uuid: string; cloud_connection_uuid: string }) =>
  `cloud:${c.organization_uuid}:${c.cloud_connection_uuid}`;

export async function createCloudConnection(
  db: Db,
  organization_uuid: string,
  spec: CloudConnectionSpec,
  box?: SecretBox,
): Promise<CloudConnection> {
  if (spec.credentials && !box)
    throw new RegistryError(
      'invalid',
      'credentials: this installation stores no credentials (KUMOSS_SECRETS_KEY is not set on the API and worker)',
    );
  const row = {
    cloud_connection_uuid: randomUUID(),
    organization_uuid,
    name: spec.name,
    provider: spec.provider,
    region: spec.region,
    project_id: spec.project_id ?? null,
    account_id: spec.account_id ?? null,
    role_arn: spec.role_arn ?? null,
  };
  const credentials_sealed =
    spec.credentials && box ? box.seal(JSON.stringify(spec.credentials), credentialsBoundTo(row)) : null;
  try {
    await db
      .insertInto('cloud_connections')
      .values({ ...row, credentials_sealed })
      .execute();
  } catch (err) {
    if (isUniqueViolation(err))
      throw new RegistryError('conflict', `A cloud connection named ${spec.name} already exists.`);
    throw err;
  }
  return { ...row, has_credentials: credentials_sealed !== null };
}

/** A connection's static credentials, opened (the worker, for the run that needs them). */
export function openConnectionCredentials(
  box: SecretBox,
  connection: Pick<
    CloudConnectionsTable,
    'organization_uuid' | 'cloud_connection_uuid' | 'credentials_sealed'
  >,
): Record<string, string> | undefined {
  if (!connection.credentials_sealed) return undefined;
  return JSON.parse(box.open(connection.credentials_sealed, credentialsBoundTo(connection))) as Record<
    string,
    string
  >;
}

export async function getCloudConnection(
  db: Db,
  organization_uuid: string,
  cloud_connection_uuid: string,
): Promise<CloudConnection | undefined> {
  return db
    .selectFrom('cloud_connections')
    .select([...CONNECTION_COLUMNS, hasCredentials])
    .where('cloud_connection_uuid', '=', cloud_connection_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
}

/** A connection with its sealed credentials, as the worker reads it for a run. */
export type ConnectionForRun = Omit<CloudConnection, 'has_credentials'> & {
  credentials_sealed: string | null;
};

/** The organization's connections with their sealed credentials (the worker's reads). */
const connectionsForRun = (db: Db, organization_uuid: string) =>
  db
    .selectFrom('cloud_connections')
    .select([...CONNECTION_COLUMNS, 'credentials_sealed'])
    .where('organization_uuid', '=', organization_uuid);

/** A connection of the organization with its sealed credentials (the worker, for a runner run). */
export async function cloudConnectionForRun(
  db: Db,
  organization_uuid: string,
  cloud_connection_uuid: string,
): Promise<ConnectionForRun | undefined> {
  return connectionsForRun(db, organization_uuid)
    .where('cloud_connection_uuid', '=', cloud_connection_uuid)
    .executeTakeFirst();
}

/**
 * The connection an organization's engine runs on `provider` take their credentials from: the oldest
 * of its connections for that cloud that names a role or holds credentials.
 */
export async function engineCloudConnection(
  db: Db,
  organization_uuid: string,
  provider: string,
): Promise<ConnectionForRun | undefined> {
  return connectionsForRun(db, organization_uuid)
    .where('provider', '=', provider as CloudConnectionsTable['provider'])
    .where((eb) => eb.or([eb('role_arn', 'is not', null), eb('credentials_sealed', 'is not', null)]))
    .orderBy('created_at')
    .orderBy('cloud_connection_uuid')
    .executeTakeFirst();
}

export async function listCloudConnections(db: Db, organization_uuid: string): Promise<CloudConnection[]> {
  return db
    .selectFrom('cloud_connections')
    .select([...CONNECTION_COLUMNS, hasCredentials])
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('name')
    .execute();
}

/** The connection must belong to the organization and run the group's backend's cloud. */
async function checkConnection(db: Db, organization_uuid: string, spec: RunnerGroupSpec): Promise<void> {
  if (!spec.cloud_connection_uuid) return;
  const conn = await getCloudConnection(db, organization_uuid, spec.cloud_connection_uuid);
  if (!conn)
    throw new RegistryError('not_found', `Cloud connection ${spec.cloud_connection_uuid} not found.`);
  const want = BACKEND_PROVIDER[spec.environment.backend_type];
  if (conn.provider !== want) {
    throw new RegistryError(
      'invalid',
      `Backend ${spec.environment.backend_type} runs on ${want}, but cloud connection ${conn.name} is ${conn.provider}.`,
    );
  }
}

export async function createRunnerGroup(
  db: Db,
  organization_uuid: string,
  input: RunnerGroupSpec,
): Promise<RunnerGroup> {
  const spec = runnerGroupSchema.parse(input);
  await checkConnection(db, organization_uuid, spec);
  const group: RunnerGroup = {
    runner_group_uuid: randomUUID(),
    organization_uuid,
    name: spec.name,
    backend_type: spec.environment.backend_type,
    cloud_connection_uuid: spec.cloud_connection_uuid ?? null,
    environment: spec.environment,
  };
  try {
    await db
      .insertInto('runner_groups')
      .values({ ...group, environment: JSON.stringify(group.environment) })
      .execute();
  } catch (err) {
    if (isUniqueViolation(err))
      throw new RegistryError('conflict', `A runner group named ${spec.name} already exists.`);
    throw err;
  }
  return group;
}

/** Replaces a group's expected environment (and connection). */
export async function updateRunnerGroup(
  db: Db,
  organization_uuid: string,
  runner_group_uuid: string,
  spec: RunnerGroupSpec,
): Promise<RunnerGroup> {
  await checkConnection(db, organization_uuid, spec);
  const r = await db
    .updateTable('runner_groups')
    .set({
      name: spec.name,
      backend_type: spec.environment.backend_type,
      cloud_connection_uuid: spec.cloud_connection_uuid ?? null,
      environment: JSON.stringify(spec.environment),
      updated_at: new Date(),
    })
    .where('runner_group_uuid', '=', runner_group_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (!r.numUpdatedRows) throw new RegistryError('not_found', `Runner group ${runner_group_uuid} not found.`);
  return (await getRunnerGroup(db, organization_uuid, runner_group_uuid)) as RunnerGroup;
}

function toGroup(row: {
  runner_group_uuid: string;
  organization_uuid: string;
  name: string;
  backend_type: RunnerGroup['backend_type'];
  cloud_connection_uuid: string | null;
  environment: unknown;
}): RunnerGroup {
  const environment = runnerEnvironmentSchema.safeParse(row.environment);
  if (!environment.success) {
    throw new RegistryError(
      'invalid',
      `Runner group ${row.runner_group_uuid} has an invalid stored environment: ${environment.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return { ...row, environment: environment.data };
}

export async function getRunnerGroup(
  db: Db,
  organization_uuid: string,
  runner_group_uuid: string,
): Promise<RunnerGroup | undefined> {
  const row = await db
    .selectFrom('runner_groups')
    .select([
      'runner_group_uuid',
      'organization_uuid',
      'name',
      'backend_type',
      'cloud_connection_uuid',
      'environment',
    ])
    .where('runner_group_uuid', '=', runner_group_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  return row ? toGroup(row) : undefined;
}

export async function listRunnerGroups(db: Db, organization_uuid: string): Promise<RunnerGroup[]> {
  const rows = await db
    .selectFrom('runner_groups')
    .select([
      'runner_group_uuid',
      'organization_uuid',
      'name',
      'backend_type',
      'cloud_connection_uuid',
      'environment',
    ])
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('name')
    .execute();
  return rows.map(toGroup);
}

/** The execution record of a DAG run, created once per workflow id (activities may run twice). */
export async function ensureExecution(
  db: Db,
  row: {
    organization_uuid: string;
    runner_group_uuid: string;
    workflow_type: string;
    workflow_uuid: string;
    workflow_run_uuid: string;
    actor_uuid?: string | undefined;
    retry_count: number;
    retried_from?: string | undefined;
  },
): Promise<string> {
  await db
    .insertInto('runner_executions')
    .values({
      runner_execution_uuid: randomUUID(),
      organization_uuid: row.organization_uuid,
      runner_group_uuid: row.runner_group_uuid,
      workflow_type: row.workflow_type,
      workflow_uuid: row.workflow_uuid,
      workflow_run_uuid: row.workflow_run_uuid,
      actor_uuid: row.actor_uuid ?? null,
      status: 'running',
      outcome: null,
      retry_count: row.retry_count,
      retried_from: row.retried_from ?? null,
      output: null,
    })
    .onConflict((oc) => oc.column('workflow_uuid').doNothing())
    .execute();
  const found = await db
    .selectFrom('runner_executions')
    .select('runner_execution_uuid')
    .where('workflow_uuid', '=', row.workflow_uuid)
    .executeTakeFirstOrThrow();
  return found.runner_execution_uuid;
}

export async function finishExecution(
  db: Db,
  workflow_uuid: string,
  fields: { status: string; outcome: string | null; output: unknown },
): Promise<void> {
  await db
    .updateTable('runner_executions')
    .set({ ...fields, output: JSON.stringify(fields.output), updated_at: new Date() })
    .where('workflow_uuid', '=', workflow_uuid)
    .execute();
}

export type DriftPlanRecord = DriftPlanAnswer;

/** Stores the plan of a detect run once (keyed by its workflow id) and returns its plan_uuid. */
export async function savePlan(
  db: Db,
  plan: Omit<DriftPlanRecord, 'plan_uuid' | 'repair_status' | 'repair_workflow_uuid'>,
): Promise<string> {
  await db
    .insertInto('runner_environment_drift_plans')
    .values({
      plan_uuid: randomUUID(),
      ...plan,
      actions_needed: JSON.stringify(plan.actions_needed),
      blocked_resources: JSON.stringify(plan.blocked_resources),
      drift_summary: JSON.stringify(plan.drift_summary),
      repair_status: null,
      repair_workflow_uuid: null,
    })
    .onConflict((oc) => oc.column('workflow_uuid').doNothing())
    .execute();
  const row = await db
    .selectFrom('runner_environment_drift_plans')
    .select('plan_uuid')
    .where('workflow_uuid', '=', plan.workflow_uuid)
    .executeTakeFirstOrThrow();
  return row.plan_uuid;
}

export async function getPlan(
  db: Db,
  organization_uuid: string,
  plan_uuid: string,
): Promise<DriftPlanRecord | undefined> {
  const row = await db
    .selectFrom('runner_environment_drift_plans')
    .selectAll()
    .where('plan_uuid', '=', plan_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    plan_uuid: row.plan_uuid,
    organization_uuid: row.organization_uuid,
    runner_group_uuid: row.runner_group_uuid,
    runner_execution_uuid: row.runner_execution_uuid,
    workflow_uuid: row.workflow_uuid,
    plan_status: row.plan_status,
    actions_needed: row.actions_needed as PlannedAction[],
    blocked_resources: row.blocked_resources as BlockedResource[],
    drift_summary: row.drift_summary as DriftSummary,
    repair_status: row.repair_status,
    repair_workflow_uuid: row.repair_workflow_uuid,
  };
}

export async function updatePlan(
  db: Db,
  plan_uuid: string,
  fields: { repair_status?: string; repair_workflow_uuid?: string; repaired_at?: Date },
): Promise<void> {
  await db
    .updateTable('runner_environment_drift_plans')
    .set(fields)
    .where('plan_uuid', '=', plan_uuid)
    .execute();
}

/** A runner group's periodic detection as set (null: none). */
export async function setRunnerSchedule(
  db: Db,
  organization_uuid: string,
  runner_group_uuid: string,
  s: { schedule: unknown; auto_apply: boolean } | null,
): Promise<void> {
  await db
    .updateTable('runner_groups')
    .set({
      schedule: s ? JSON.stringify(s.schedule) : null,
      schedule_auto_apply: s?.auto_apply ?? false,
    })
    .where('runner_group_uuid', '=', runner_group_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .execute();
}

export async function getRunnerSchedule(
  db: Db,
  organization_uuid: string,
  runner_group_uuid: string,
): Promise<{ schedule: StackSchedule; auto_apply: boolean } | null> {
  const row = await db
    .selectFrom('runner_groups')
    .select(['schedule', 'schedule_auto_apply'])
    .where('runner_group_uuid', '=', runner_group_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .executeTakeFirst();
  return row?.schedule
    ? { schedule: stackScheduleSchema.parse(row.schedule), auto_apply: row.schedule_auto_apply }
    : null;
}

/** A group's DAG runs, newest first (at most 200). */
export async function listExecutions(
  db: Db,
  organization_uuid: string,
  runner_group_uuid: string,
): Promise<RunnerExecution[]> {
  const rows = await db
    .selectFrom('runner_executions')
    .select([
      'runner_execution_uuid',
      'workflow_type',
      'workflow_uuid',
      'workflow_run_uuid',
      'actor_uuid',
      'status',
      'outcome',
      'retry_count',
      'retried_from',
      'created_at',
      'updated_at',
    ])
    .where('runner_group_uuid', '=', runner_group_uuid)
    .where('organization_uuid', '=', organization_uuid)
    .orderBy('created_at', 'desc')
    .limit(200)
    .execute();
  return rows.map((r) => ({
    ...r,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  }));
}
