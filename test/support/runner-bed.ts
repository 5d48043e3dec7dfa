// What the runner DAG tests run against: moto_server (the real AWS APIs' wire protocol, from PyPI)
// with its request recorder, the loopback Google APIs (and their token service), the metadata
// store, and helpers that build a runner group's environment with plain SDK / REST calls —
// independent of Kumoss's own repairs. The worker's clients are the real ones
// (activities/runners/connection-clients.ts): each group's connection holds its own credentials —
// AWS keys an admin stored, a Google workload identity federation configuration — and each step
// signs with those.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STSClient } from '@aws-sdk/client-sts';
import { CloudCredentials } from '../../activities/cloud-credentials';
import { connectionClients } from '../../activities/runners/connection-clients';
import { secretBoxFromEnv, type SecretBox } from '../../shared/infra/secret-box';
import { CreateLogGroupCommand, PutRetentionPolicyCommand } from '@aws-sdk/client-cloudwatch-logs';
import { CreateClusterCommand, RegisterTaskDefinitionCommand } from '@aws-sdk/client-ecs';
import { CreateSecretCommand, DescribeSecretCommand } from '@aws-sdk/client-secrets-manager';
import type { RunnerDeps } from '../../activities/runners';
import { awsClientFactory, GcpClient, type AwsClients } from '../../activities/runners/clouds';
import { startAwsEmulator, type AwsEmulator } from '../../scripts/embedded/aws-emulator';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import {
  createCloudConnection,
  createRunnerGroup,
  type CloudConnection,
  type RunnerGroup,
} from '../../shared/infra/db/runners';
import { ensureOrganization } from '../../shared/infra/db/users';
import type { RunnerEnvironment } from '../../shared/runner-contracts';
import { federationCredential, startGcpLoopback, type GcpLoopback } from './gcp-loopback';

/** The access key id the AWS connections hold, which the worker's AWS clients sign with. */
export const WORKER_ACCESS_KEY = 'AKIAKUMOSSTEST000001';

export interface RunnerBed {
  aws: AwsEmulator;
  gcp: GcpLoopback;
  db: Db;
  /** The credentials the worker's AWS clients use (the secret scan looks for them). */
  awsSecret: string;
  gcpToken: string;
  /** The worker's runner dependencies. */
  deps: RunnerDeps;
  /** Mutating AWS actions the worker sent in `region` (use a region of the test's own). */
  workerMutations(region: string): Promise<string[]>;
  /** Every AWS request the worker sent in `region`. */
  workerCalls(region: string): Promise<number>;
  /** SDK clients for the test's own setup and out-of-band changes. */
  awsClients(region: string): AwsClients;
  gcpClient: GcpClient;
  organization(name?: string): Promise<string>;
  connection(org: string, provider: 'aws' | 'gcp', region?: string): Promise<CloudConnection>;
  /**
   * The credentials a connection of `provider` stores (what an admin sends in
   * `POST /api/v1/cloud-connections`): the worker's steps sign with these.
   */
  connectionCredentials(provider: 'aws' | 'gcp'): Record<string, string>;
  group(
    org: string,
    connection: CloudConnection | null,
    environment: RunnerEnvironment,
  ): Promise<RunnerGroup>;
  close(): Promise<void>;
}

/** `databaseUrl`: the run's metadata store (stack().databaseUrl in a test file). */
export async function startRunnerBed(databaseUrl: string): Promise<RunnerBed> {
  // Test secrets carry KUMOSS-SECRET: the run's last step scans histories and artifacts for it.
  const gcpToken = `ya29.KUMOSS-SECRET-gcp-${randomBytes(12).toString('hex')}`;
  const awsSecret = `KUMOSS-SECRET-aws-${randomBytes(12).toString('hex')}`;
  // The identity provider's token a Google connection's federation configuration reads from a file.
  const subjectToken = `KUMOSS-SECRET-subject-${randomBytes(12).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-runner-bed-'));
  const subjectFile = join(dir, 'subject-token');
  writeFileSync(subjectFile, subjectToken);
  const [aws, gcp] = await Promise.all([
    startAwsEmulator({ record: true }),
    startGcpLoopback({ token: gcpToken, sts: { subjectToken, lifetimeSeconds: 3600 } }),
  ]);
  const db = createDb(databaseUrl);
  await migrate(db);
  // The secret box the connections' credentials are sealed with (the test stack sets KUMOSS_SECRETS_KEY).
  const box = secretBoxFromEnv() as SecretBox;
  // The worker (with its connections' keys) and the test's own setup sign with different keys, so
  // the recorder tells them apart.
  const setup = awsClientFactory({
    endpoint: aws.endpoint,
    credentials: { accessKeyId: 'AKIAKUMOSSSETUP00001', secretAccessKey: 'setup' },
  });
  const gcpClient = new GcpClient({ endpoint: gcp.url, token: gcpToken });
  const connectionCredentials = (provider: 'aws' | 'gcp'): Record<string, string> =>
    provider === 'gcp'
      ? {
          credential_json: JSON.stringify(federationCredential(gcp, subjectFile)),
        }
      : { access_key_id: WORKER_ACCESS_KEY, secret_access_key: awsSecret };
  /** The AWS actions the worker (not the test's setup) sent in `region`. */
  const workerActions = async (region: string) =>
    (await aws.recordedRequests())
      .filter((r) => r.accessKeyId === WORKER_ACCESS_KEY && r.region === region)
      .map((r) => r.action);
  return {
    aws,
    gcp,
    db,
    awsSecret,
    gcpToken,
    deps: {
      db,
      clients: connectionClients({
        db,
        credentials: new CloudCredentials({
          db,
          durationSeconds: 900,
          sts: () =>
            new STSClient({
              region: 'us-east-1',
              endpoint: aws.endpoint,
              credentials: { accessKeyId: 'AKIAKUMOSSWORKER0001', secretAccessKey: 'worker' },
            }),
          box,
          googleEndpoints: [new URL(gcp.url).origin],
        }),
        awsEndpoint: aws.endpoint,
        gcpEndpoint: gcp.url,
        // moto on loopback is the worker's AWS emulator, as under `npm start`: a connection that
        // holds nothing (one a devops user made in the web application) signs with its fixed keys.
        awsEmulator: { AWS_ACCESS_KEY_ID: WORKER_ACCESS_KEY, AWS_SECRET_ACCESS_KEY: awsSecret },
      }),
    },
    awsClients: setup,
    workerMutations: async (region) => mutatingActions(await workerActions(region)),
    workerCalls: async (region) => (await workerActions(region)).length,
    gcpClient,
    organization: (name) => ensureOrganization(db, name ?? `runner-org-${randomUUID().slice(0, 8)}`),
    connectionCredentials,
    connection: (org, provider, region) =>
      createCloudConnection(
        db,
        org,
        {
          name: `${provider}-${randomUUID().slice(0, 8)}`,
          provider,
          region: region ?? (provider === 'aws' ? 'us-east-1' : 'europe-west1'),
          ...(provider === 'gcp' ? { project_id: `kumoss-${randomUUID().slice(0, 8)}` } : {}),
          credentials: connectionCredentials(provider),
        },
        box,
      ),
    group: (org, connection, environment) =>
      createRunnerGroup(db, org, {
        name: `group-${randomUUID().slice(0, 8)}`,
        ...(connection ? { cloud_connection_uuid: connection.cloud_connection_uuid } : {}),
        environment,
      }),
    async close() {
      await Promise.allSettled([aws.stop(), gcp.close(), db.destroy()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A unique name for a cloud resource of one test. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

export function awsEnvironment(
  overrides: Partial<Extract<RunnerEnvironment, { backend_type: 'aws_ecs' }>> = {},
) {
  const id = randomUUID().slice(0, 8);
  return {
    backend_type: 'aws_ecs' as const,
    ecs_cluster: { name: `runners-${id}`, container_insights: 'enabled' as const },
    log_group: { name: `/kumoss/runners/${id}`, retention_days: 14 },
    task_definition: {
      family: `runner-${id}`,
      container_name: 'runner',
      image: 'ghcr.io/actions/actions-runner:2.321.0',
      cpu: '512',
      memory: '1024',
    },
    pull_secret: { name: `runners/${id}/registry` },
    ...overrides,
  };
}

/** Creates everything an aws_ecs environment names, with plain SDK calls. */
export async function provisionAws(
  clients: AwsClients,
  env: ReturnType<typeof awsEnvironment>,
): Promise<void> {
  await clients.ecs.send(
    new CreateClusterCommand({
      clusterName: env.ecs_cluster.name,
      settings: [{ name: 'containerInsights', value: env.ecs_cluster.container_insights }],
    }),
  );
  await clients.logs.send(new CreateLogGroupCommand({ logGroupName: env.log_group.name }));
  await clients.logs.send(
    new PutRetentionPolicyCommand({
      logGroupName: env.log_group.name,
      retentionInDays: env.log_group.retention_days,
    }),
  );
  await clients.secrets.send(
    new CreateSecretCommand({
      Name: env.pull_secret.name,
      SecretString: '{"username":"bot","password":"registry-pass"}',
    }),
  );
  const secret = await clients.secrets.send(new DescribeSecretCommand({ SecretId: env.pull_secret.name }));
  await clients.ecs.send(
    new RegisterTaskDefinitionCommand({
      family: env.task_definition.family,
      cpu: env.task_definition.cpu,
      memory: env.task_definition.memory,
      networkMode: 'awsvpc',
      requiresCompatibilities: ['FARGATE'],
      containerDefinitions: [
        {
          name: env.task_definition.container_name,
          image: env.task_definition.image,
          essential: true,
          logConfiguration: {
            logDriver: 'awslogs',
            options: {
              'awslogs-group': env.log_group.name,
              'awslogs-region': clients.region,
              'awslogs-stream-prefix': 'runner',
            },
          },
          repositoryCredentials: { credentialsParameter: secret.ARN ?? '' },
        },
      ],
    }),
  );
}

export function gceEnvironment() {
  const id = randomUUID().slice(0, 8);
  return {
    backend_type: 'gce' as const,
    service_account: { account_id: `runner-${id}`, display_name: 'CI runners' },
    instance_template: {
      name: `runner-${id}`,
      machine_type: 'e2-standard-2',
      source_image: 'projects/debian-cloud/global/images/family/debian-12',
    },
  };
}

export function cloudRunEnvironment() {
  const id = randomUUID().slice(0, 8);
  return {
    backend_type: 'cloud_run' as const,
    service_account: { account_id: `runner-${id}`, display_name: 'CI runners' },
    cloud_run_job: { name: `runner-${id}`, image: 'europe-docker.pkg.dev/acme/ci/runner:2.321.0' },
  };
}

/** Creates what a gce or cloud_run environment names, through the Google REST APIs. */
export async function provisionGcp(
  gcp: GcpClient,
  connection: CloudConnection,
  env: ReturnType<typeof gceEnvironment> | ReturnType<typeof cloudRunEnvironment>,
): Promise<void> {
  const project = connection.project_id ?? '';
  await gcp.createServiceAccount(project, env.service_account.account_id, {
    displayName: env.service_account.display_name,
    description: '',
  });
  const email = gcp.serviceAccountEmail(project, env.service_account.account_id);
  if (env.backend_type === 'gce') {
    await gcp.insertInstanceTemplate(project, {
      name: env.instance_template.name,
      properties: {
        machineType: env.instance_template.machine_type,
        disks: [{ boot: true, initializeParams: { sourceImage: env.instance_template.source_image } }],
        serviceAccounts: [{ email }],
      },
    });
  } else {
    await gcp.createJob(project, connection.region, env.cloud_run_job.name, {
      template: { template: { containers: [{ image: env.cloud_run_job.image }], serviceAccount: email } },
    });
  }
}

/** moto actions that change something (the detect DAG must never send one). */
export function mutatingActions(actions: string[]): string[] {
  return actions.filter((a) => /\.(Create|Register|Put|Update|Delete|Deregister|Restore|Tag|Untag)/.test(a));
}
