// The runner DAG's cloud calls carry the group's connection's own credentials and nothing of the
// worker's: the AWS keys an admin stored (signed requests in moto's recorder name them), the role the
// connection names assumed with the organization's id as the external id (an STS on loopback that
// enforces trust policies as AWS does: another organization naming the role is refused and its run
// touches no cloud), a Google access token its federation configuration was exchanged for; a
// connection that holds nothing fails the run without a call. The worker's own AWS keys and Google
// token are set in this process's environment throughout, and never show up.
import { randomBytes, randomUUID } from 'node:crypto';
import { STSClient } from '@aws-sdk/client-sts';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudCredentials } from '../../activities/cloud-credentials';
import { connectionClients } from '../../activities/runners/connection-clients';
import { createCloudConnection } from '../../shared/infra/db/runners';
import { secretBoxFromEnv } from '../../shared/infra/secret-box';
import type { RunnerDagState } from '../../shared/runner-contracts';
import {
  awsEnvironment,
  cloudRunEnvironment,
  provisionAws,
  provisionGcp,
  startRunnerBed,
  type RunnerBed,
} from '../support/runner-bed';
import { startStsLoopback, type StsLoopback } from '../support/sts-loopback';
import { stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

/** The key the test's own provisioning signs with (test/support/runner-bed.ts). */
const SETUP_ACCESS_KEY = 'AKIAKUMOSSSETUP00001';

const WORKER_ENV = {
  AWS_ACCESS_KEY_ID: 'AKIAKUMOSSWORKERENV1',
  AWS_SECRET_ACCESS_KEY: 'KUMOSS-SECRET-worker-own-aws',
  GOOGLE_OAUTH_ACCESS_TOKEN: 'ya29.KUMOSS-SECRET-worker-own-google',
};

describe("a runner group's calls carry its connection's credentials, never the worker's", () => {
  let bed: RunnerBed;
  let sts: StsLoopback;
  let h: TemporalHarness;
  const saved: Record<string, string | undefined> = {};
  const roleOfA = `arn:aws:iam::111111111111:role/kumoss-runner-${randomUUID().slice(0, 8)}`;
  let orgA: string;
  let orgB: string;

  beforeAll(async () => {
    for (const [k, v] of Object.entries(WORKER_ENV)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    bed = await startRunnerBed(stack().databaseUrl);
    orgA = await bed.organization();
    orgB = await bed.organization();
    // A's role trusts A's organization id as the external id, and nothing else.
    sts = await startStsLoopback({ [roleOfA]: orgA });
    const clients = connectionClients({
      db: bed.db,
      credentials: new CloudCredentials({
        db: bed.db,
        durationSeconds: 900,
        sts: () =>
          new STSClient({
            region: 'us-east-1',
            endpoint: sts.endpoint,
            credentials: { accessKeyId: 'AKIAKUMOSSWORKER0001', secretAccessKey: 'worker' },
          }),
        box: secretBoxFromEnv(),
        googleEndpoints: [new URL(bed.gcp.url).origin],
      }),
      awsEndpoint: bed.aws.endpoint,
      gcpEndpoint: bed.gcp.url,
    });
    h = await temporalHarness('runner-credentials', testActivities({ runners: { db: bed.db, clients } }));
  });
  afterAll(async () => {
    await h?.close();
    await sts?.close();
    await bed?.close();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  const detect = (org: string, group: { runner_group_uuid: string }) =>
    h.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: h.taskQueue,
      workflowId: randomUUID(),
      args: [{ runner_group_uuid: group.runner_group_uuid, organization_uuid: org }],
    }) as Promise<RunnerDagState>;
  /** The access key ids that signed requests in `region` (moto's recorder), but the test's own setup's. */
  const signers = async (region: string) =>
    new Set(
      (await bed.aws.recordedRequests())
        .filter((r) => r.region === region && r.accessKeyId !== SETUP_ACCESS_KEY)
        .map((r) => r.accessKeyId),
    );
  const failureOf = async (run: Promise<unknown>): Promise<string> => {
    const err = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const messages: string[] = [];
    for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
      messages.push(String(e.message));
    return messages.join(' <- ');
  };

  it("stored AWS keys sign every call; the worker's own keys sign none", async () => {
    const region = 'ap-south-1';
    const keyId = `AKIA${randomBytes(8).toString('hex').toUpperCase()}`;
    const conn = await createCloudConnection(
      bed.db,
      orgA,
      {
        name: `aws-${randomUUID().slice(0, 8)}`,
        provider: 'aws',
        region,
        credentials: { access_key_id: keyId, secret_access_key: 'KUMOSS-SECRET-a-static' },
      },
      secretBoxFromEnv(),
    );
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(region), env);
    const group = await bed.group(orgA, conn, env);
    expect((await detect(orgA, group)).plan_status).toBe('clean');
    const seen = await signers(region);
    expect(seen.has(keyId)).toBe(true);
    expect(seen.has(WORKER_ENV.AWS_ACCESS_KEY_ID)).toBe(false);
    expect(seen.has('AKIAKUMOSSWORKER0001')).toBe(false);
  });

  it("a role is assumed with the organization's id as the external id; another organization naming it is refused and touches no cloud", async () => {
    const region = 'ap-southeast-2';
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(region), env);
    const roleConnection = (org: string) =>
      createCloudConnection(bed.db, org, {
        name: `role-${randomUUID().slice(0, 8)}`,
        provider: 'aws',
        region,
        role_arn: roleOfA,
      });
    const mine = await bed.group(orgA, await roleConnection(orgA), env);
    expect((await detect(orgA, mine)).plan_status).toBe('clean');
    const asked = sts.requests.filter((r) => r.roleArn === roleOfA);
    expect(asked.at(-1)?.externalId).toBe(orgA);
    // The steps signed with the temporary keys STS issued (ASIA…), not the worker's.
    const seen = await signers(region);
    expect([...seen].every((k) => k.startsWith('ASIA'))).toBe(true);
    expect(seen.size).toBeGreaterThan(0);

    const calls = async () =>
      (await bed.aws.recordedRequests()).filter(
        (r) => r.region === region && r.accessKeyId !== SETUP_ACCESS_KEY,
      ).length;
    const callsBefore = await calls();
    const theirs = await bed.group(orgB, await roleConnection(orgB), env);
    const message = await failureOf(detect(orgB, theirs));
    expect(message).toMatch(/No credentials for cloud connection role-/);
    expect(sts.requests.at(-1)).toMatchObject({ roleArn: roleOfA, externalId: orgB });
    expect(await calls()).toBe(callsBefore);
  });

  it('a Google connection signs with the token its federation configuration was exchanged for', async () => {
    const conn = await bed.connection(orgA, 'gcp');
    const env = cloudRunEnvironment();
    await provisionGcp(bed.gcpClient, conn, env);
    const before = bed.gcp.requests.length;
    const issuedBefore = bed.gcp.issued.length;
    const group = await bed.group(orgA, conn, env);
    expect((await detect(orgA, group)).plan_status).toBe('clean');
    const calls = bed.gcp.requests.slice(before).filter((r) => r.path !== '/v1/token');
    expect(calls.length).toBeGreaterThan(0);
    const issued = new Set(bed.gcp.issued.slice(issuedBefore));
    expect(issued.size).toBeGreaterThan(0);
    expect(calls.every((r) => r.token !== undefined && issued.has(r.token))).toBe(true);
    expect(calls.some((r) => r.token === WORKER_ENV.GOOGLE_OAUTH_ACCESS_TOKEN)).toBe(false);
  });

  it('a connection that holds no credentials fails the run, naming it, without a call', async () => {
    const region = 'sa-east-1';
    const conn = await createCloudConnection(bed.db, orgA, {
      name: `bare-${randomUUID().slice(0, 8)}`,
      provider: 'aws',
      region,
    });
    const group = await bed.group(orgA, conn, awsEnvironment());
    const message = await failureOf(detect(orgA, group));
    expect(message).toContain(`cloud connection ${conn.name} holds no credentials`);
    expect((await bed.aws.recordedRequests()).filter((r) => r.region === region)).toEqual([]);
  });
});
