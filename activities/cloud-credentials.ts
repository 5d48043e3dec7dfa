// A run's own cloud credentials. An engine process gets cloud credentials only from its
// organization's cloud connection for the run's cloud, and never any of the worker's own (for any
// cloud: AWS keys, profiles, web-identity and container settings, Google credential files and
// tokens, ARM_*/AZURE_*, OCI_*, KUBECONFIG and KUBE_* are dropped from every engine environment):
// - AWS with a role: the worker assumes it with its own identity — STS AssumeRole, a session named
//   after the run, the organization's id as the external id (a role trusts one organization:
//   another that names it is refused by STS), lasting as long as an engine call may — and the run
//   gets those temporary keys;
// - GCP: the connection's Google credential (a service account key or a workload identity
//   federation configuration) gives a short-lived access token through google-auth-library;
// - AWS static keys, Azure and OCI: the static credentials an admin stored, sealed, in the
//   connection, as the variables their providers read.
// Another organization's run has its own and never sees these. A run of an organization without
// such a connection has no cloud credential at all — but for the AWS emulator the worker is
// configured with (moto on loopback under `npm start`), whose fixed keys are nobody's identity.
import { KUMOSS_SESSION_PREFIX } from '../shared/audit-events';
import { AssumeRoleCommand, type STSClient } from '@aws-sdk/client-sts';
import { IdentityPoolClient, JWT } from 'google-auth-library';
import { CLOUD_DOMAINS } from './egress';
import { GOOGLE_AUTH_ORIGINS, googleCredentialProblem } from '../shared/google-credentials';
import type { Db } from '../shared/infra/db';
import {
  engineCloudConnection,
  openConnectionCredentials,
  type ConnectionForRun,
} from '../shared/infra/db/runners';
import { sessionOrganization } from '../shared/infra/db/sessions';
import type { SecretBox } from '../shared/infra/secret-box';

/** The worker's own cloud credential settings, of every cloud: never given to an engine process. */
export const WORKER_CLOUD_CREDENTIALS = new RegExp(
  [
    '^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|SECURITY_TOKEN|PROFILE|DEFAULT_PROFILE|SHARED_CREDENTIALS_FILE|CONFIG_FILE|WEB_IDENTITY_TOKEN_FILE|ROLE_ARN|ROLE_SESSION_NAME|CONTAINER_CREDENTIALS_RELATIVE_URI|CONTAINER_CREDENTIALS_FULL_URI|CONTAINER_AUTHORIZATION_TOKEN)$',
    '^GOOGLE_(APPLICATION_CREDENTIALS|CREDENTIALS|CLOUD_KEYFILE_JSON|OAUTH_ACCESS_TOKEN|IMPERSONATE_SERVICE_ACCOUNT)$',
    '^GCLOUD_KEYFILE_JSON$',
    '^CLOUDSDK_',
    '^ARM_',
    '^AZURE_',
    '^OCI_',
    '^KUBECONFIG$',
    '^KUBE_',
  ].join('|'),
);

/** Google's scope for the engine's provider (every API it may call). */
const GOOGLE_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/**
 * A Google credential's access token and when it stops working (google-auth-library): a service
 * account key signs its own assertion; a workload identity federation configuration exchanges the
 * worker's subject token at the token service. Refused unless googleCredentialProblem() finds none.
 */
export async function googleAccessToken(
  credential: Record<string, unknown>,
  allowedOrigins: string[] = GOOGLE_AUTH_ORIGINS,
): Promise<{ token: string; expiresAt: number }> {
  const problem = googleCredentialProblem(credential, allowedOrigins);
  if (problem) throw new Error(`the connection's Google credential cannot be used: ${problem}`);
  const client =
    credential.type === 'service_account'
      ? new JWT({
          email: credential.client_email as string,
          key: credential.private_key as string,
          scopes: [GOOGLE_SCOPE],
        })
      : new IdentityPoolClient({ ...(credential as object), scopes: [GOOGLE_SCOPE] } as never);
  const { token } = await client.getAccessToken();
  if (!token) throw new Error('the Google credential gave no access token');
  const expiry = client.credentials.expiry_date;
  return { token, expiresAt: expiry ?? Date.now() + 5 * 60 * 1000 };
}

export interface RunCredentials {
  /** The variables to set for the engine. */
  env: Record<string, string>;
  /** When they stop working (epoch ms). */
  expiresAt: number;
  /**
   * Set when the run has no credential for its cloud: which connection is missing. An engine call
   * that fails says so beside the engine's own message.
   */
  missing?: string;
  /** The cloud's API domains the engine's network reaches with them (activities/egress.ts). */
  domains?: string[];
}

/** What a run is, for the session name the cloud's audit log shows. */
export interface RunIdentity {
  /** Undefined: a run of no organization (a round started from the Temporal CLI), with no connection. */
  organization_uuid: string | undefined;
  cloud: string;
  /** `session <id> round <id>` or `stack <id> run <id>`: shortened to the role session name. */
  run: string;
}

/** A role session name: the characters STS allows, at most 64. */
export function roleSessionName(run: string): string {
  return `${KUMOSS_SESSION_PREFIX}${run}`.replace(/[^\w+=,.@-]+/g, '-').slice(0, 64);
}

export class CloudCredentials {
  constructor(
    private readonly deps: {
      db: Db;
      /** An STS client acting with the worker's own identity. */
      sts: () => STSClient;
      /** How long a run's credentials last (seconds; STS allows 900 to the role's maximum). */
      durationSeconds: number;
      /** KUMOSS_SECRETS_KEY's box: opens connections' stored credentials. */
      box?: SecretBox;
      /** Google endpoints besides Google's own a stored Google credential may name (runners.gcp.endpoint_url). */
      googleEndpoints?: string[];
      /**
       * The keys of the AWS emulator the engine is configured with (moto on loopback): what an AWS
       * run of an organization without an AWS connection gets. Absent: such a run gets none.
       */
      awsEmulator?: Record<string, string>;
    },
  ) {}

  /**
   * The run's credentials: its connection's, the emulator's, or none (`missing` says why); with a
   * connection, its cloud's API domains are what the engine's network reaches.
   */
  async forRun(id: RunIdentity): Promise<RunCredentials> {
    const org = id.organization_uuid;
    const connection = org ? await engineCloudConnection(this.deps.db, org, id.cloud) : undefined;
    const c = await this.credentialsFor(id, org, connection);
    return connection ? { ...c, domains: CLOUD_DOMAINS[connection.provider] ?? [] } : c;
  }

  /**
   * The credentials of one connection of the organization (a runner group's): its role assumed,
   * or what an admin stored in it. Refused when it holds neither.
   */
  async forConnection(
    organization_uuid: string,
    connection: ConnectionForRun,
    run: string,
  ): Promise<RunCredentials> {
    if (!connection.role_arn && !connection.credentials_sealed)
      throw new Error(
        `cloud connection ${connection.name} holds no credentials: an admin stores its role_arn or credentials (POST /api/v1/cloud-connections)`,
      );
    return this.credentialsFor(
      { organization_uuid, cloud: connection.provider, run },
      organization_uuid,
      connection,
    );
  }

  private async credentialsFor(
    id: RunIdentity,
    org: string | undefined,
    connection: ConnectionForRun | undefined,
  ): Promise<RunCredentials> {
    if (!org || !connection) {
      if (id.cloud === 'aws' && this.deps.awsEmulator)
        return { env: this.deps.awsEmulator, expiresAt: Number.POSITIVE_INFINITY };
      return {
        env: {},
        expiresAt: Number.POSITIVE_INFINITY,
        missing:
          `${org ? 'the organization has' : 'a run of no organization has'} no ${id.cloud} cloud connection, so the engine ran without cloud credentials ` +
          '(an admin registers one: POST /api/v1/cloud-connections)',
      };
    }
    if (connection.provider === 'aws' && connection.role_arn) {
      const r = await this.deps.sts().send(
        new AssumeRoleCommand({
          RoleArn: connection.role_arn,
          RoleSessionName: roleSessionName(id.run),
          // The role's trust policy names the organization (sts:ExternalId): a role of one
          // organization is never assumed for another that names it.
          ExternalId: org,
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
        expiresAt: c.Expiration ? c.Expiration.getTime() : Date.now() + this.deps.durationSeconds * 1000,
      };
    }
    if (!this.deps.box)
      throw new Error(
        `cloud connection ${connection.name} holds credentials, but this worker has no KUMOSS_SECRETS_KEY to open them`,
      );
    const stored = openConnectionCredentials(this.deps.box, connection) ?? {};
    const field = (name: string): string => {
      const v = stored[name];
      if (!v) throw new Error(`cloud connection ${connection.name} has no ${name}`);
      return v;
    };
    // Static credentials do not expire; they are read again for each run.
    const forRun = (
      env: Record<string, string>,
      expiresAt = Date.now() + this.deps.durationSeconds * 1000,
    ) => ({ env, expiresAt });
    switch (connection.provider) {
      case 'aws':
        return forRun({
          AWS_ACCESS_KEY_ID: field('access_key_id'),
          AWS_SECRET_ACCESS_KEY: field('secret_access_key'),
          AWS_REGION: connection.region,
        });
      case 'gcp': {
        const { token, expiresAt } = await googleAccessToken(
          JSON.parse(field('credential_json')) as Record<string, unknown>,
          [...GOOGLE_AUTH_ORIGINS, ...(this.deps.googleEndpoints ?? [])],
        );
        return forRun(
          {
            GOOGLE_OAUTH_ACCESS_TOKEN: token,
            ...(connection.project_id ? { GOOGLE_PROJECT: connection.project_id } : {}),
            GOOGLE_REGION: connection.region,
          },
          expiresAt,
        );
      }
      case 'azure':
        return forRun({
          ARM_CLIENT_ID: field('client_id'),
          ARM_CLIENT_SECRET: field('client_secret'),
          ARM_TENANT_ID: field('tenant_id'),
          ARM_SUBSCRIPTION_ID: field('subscription_id'),
        });
      case 'oci':
        return forRun({
          OCI_TENANCY_OCID: field('tenancy_ocid'),
          OCI_USER_OCID: field('user_ocid'),
          OCI_FINGERPRINT: field('fingerprint'),
          OCI_PRIVATE_KEY: field('private_key'),
          OCI_REGION: connection.region,
        });
    }
  }

  /** The organization of a session (its run credentials follow it). */
  sessionOrganization(sessionId: string): Promise<string | undefined> {
    return sessionOrganization(this.deps.db, sessionId);
  }
}
