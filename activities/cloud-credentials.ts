// A run's own cloud credentials (issue 26 item 2). When the organization of a run has a cloud
// connection for the run's cloud that names a role (AWS: `role_arn`), the worker assumes that role
// with its own identity — STS AssumeRole, a session named after the run, lasting as long as an
// engine call may — and the engine gets those temporary credentials and none of the worker's own
// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, profiles, web-identity and
// container settings are dropped). Another organization's run assumes its own role and never sees
// these. An organization without such a connection runs with the worker's cloud variables, as a
// single-tenant deployment does (README: threat model).
import { AssumeRoleCommand, type STSClient } from '@aws-sdk/client-sts';
import type { Db } from '../shared/db';
import { engineCloudConnection } from '../shared/db/runners';

/** The worker's own AWS credential settings: never given to a run that has credentials of its own. */
const WORKER_AWS_CREDENTIALS =
  /^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|SECURITY_TOKEN|PROFILE|DEFAULT_PROFILE|SHARED_CREDENTIALS_FILE|CONFIG_FILE|WEB_IDENTITY_TOKEN_FILE|ROLE_ARN|ROLE_SESSION_NAME|CONTAINER_CREDENTIALS_RELATIVE_URI|CONTAINER_CREDENTIALS_FULL_URI|CONTAINER_AUTHORIZATION_TOKEN)$/;

export interface RunCredentials {
  /** The variables to set for the engine. */
  env: Record<string, string>;
  /** The variables of the worker's own environment to drop for it. */
  drop: RegExp;
  /** When they stop working (epoch ms). */
  expiresAt: number;
}

/** What a run is, for the session name the cloud's audit log shows. */
export interface RunIdentity {
  organization_uuid: string;
  cloud: string;
  /** `session <id> round <id>` or `stack <id> run <id>`: shortened to the role session name. */
  run: string;
}

/** A role session name: the characters STS allows, at most 64. */
export function roleSessionName(run: string): string {
  return `kumoss-${run}`.replace(/[^\w+=,.@-]+/g, '-').slice(0, 64);
}

export class CloudCredentials {
  constructor(
    private readonly deps: {
      db: Db;
      /** An STS client acting with the worker's own identity. */
      sts: () => STSClient;
      /** How long a run's credentials last (seconds; STS allows 900 to the role's maximum). */
      durationSeconds: number;
    },
  ) {}

  /** The run's credentials, or undefined when its organization has no role for its cloud. */
  async forRun(id: RunIdentity): Promise<RunCredentials | undefined> {
    if (id.cloud !== 'aws') return undefined;
    const connection = await engineCloudConnection(this.deps.db, id.organization_uuid, 'aws');
    if (!connection?.role_arn) return undefined;
    const r = await this.deps.sts().send(
      new AssumeRoleCommand({
        RoleArn: connection.role_arn,
        RoleSessionName: roleSessionName(id.run),
        DurationSeconds: Math.min(43_200, Math.max(900, this.deps.durationSeconds)),
      }),
    );
    const c = r.Credentials;
    if (!c?.AccessKeyId || !c.SecretAccessKey || !c.SessionToken)
      throw new Error(`STS answered AssumeRole on ${connection.role_arn} without credentials`);
    return {
      env: {
        AWS_ACCESS_KEY_ID: c.AccessKeyId,
        AWS_SECRET_ACCESS_KEY: c.SecretAccessKey,
        AWS_SESSION_TOKEN: c.SessionToken,
        AWS_REGION: connection.region,
      },
      drop: WORKER_AWS_CREDENTIALS,
      expiresAt: c.Expiration ? c.Expiration.getTime() : Date.now() + this.deps.durationSeconds * 1000,
    };
  }

  /** The organization of a session (its run credentials follow it). */
  async sessionOrganization(sessionId: string): Promise<string | undefined> {
    const row = await this.deps.db
      .selectFrom('sessions')
      .select('organization_uuid')
      .where('session_id', '=', sessionId)
      .executeTakeFirst();
    return row?.organization_uuid;
  }
}
