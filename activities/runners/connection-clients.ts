// A runner group's cloud clients, built for each step from the group's cloud connection: the role
// it names assumed for this run (STS, the organization's id as the external id) or the credentials
// an admin stored in it — never the worker's own default chain or Application Default Credentials.
// A connection that holds neither is refused, but for the AWS emulator the worker is configured with
// (moto on loopback under `npm start`), whose fixed keys are nobody's identity.
import type { CloudCredentials } from '../cloud-credentials';
import type { Db } from '../../shared/infra/db';
import { cloudConnectionForRun } from '../../shared/infra/db/runners';
import { awsClientFactory, GcpClient } from './clouds';
import type { RunnerDeps } from './index';

export interface ConnectionClientsOptions {
  db: Db;
  credentials: CloudCredentials;
  /** runners.aws.endpoint_url (empty: AWS's own). */
  awsEndpoint?: string;
  /** runners.gcp.endpoint_url (empty: Google's own). */
  gcpEndpoint?: string;
  /** The AWS emulator's keys as the SDK's variables, when awsEndpoint is one on loopback. */
  awsEmulator?: Record<string, string>;
}

export function connectionClients(opts: ConnectionClientsOptions): RunnerDeps['clients'] {
  return async (organization_uuid, connection, run) => {
    const stored = await cloudConnectionForRun(opts.db, organization_uuid, connection.cloud_connection_uuid);
    if (!stored)
      throw new Error(`cloud connection ${connection.name} is not one of the organization's any more`);
    // A connection that holds nothing, on the loopback emulator: its fixed keys.
    const emulated =
      stored.provider === 'aws' && !stored.role_arn && !stored.credentials_sealed && opts.awsEmulator;
    const env = emulated || (await opts.credentials.forConnection(organization_uuid, stored, run)).env;
    switch (stored.provider) {
      case 'aws':
        return {
          aws: awsClientFactory({
            ...(opts.awsEndpoint ? { endpoint: opts.awsEndpoint } : {}),
            credentials: {
              accessKeyId: env.AWS_ACCESS_KEY_ID ?? '',
              secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? '',
              ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
            },
          })(stored.region),
        };
      case 'gcp':
        return {
          gcp: new GcpClient({
            ...(opts.gcpEndpoint ? { endpoint: opts.gcpEndpoint } : {}),
            token: env.GOOGLE_OAUTH_ACCESS_TOKEN ?? '',
          }),
        };
      default:
        return {};
    }
  };
}
