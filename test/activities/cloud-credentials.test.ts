// A run's cloud credentials are its own: a root that reads `/proc/self/environ`
// finds the temporary credentials of its organization's role — assumed by the worker through STS,
// in a session named after the run — and not the worker's own keys; another organization's run gets
// other credentials. Real terraform in the real sandbox, moto's STS through the real AWS SDK.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CloudCredentials,
  roleSessionName,
  WORKER_CLOUD_CREDENTIALS,
} from '../../activities/cloud-credentials';
import { startStsLoopback } from '../support/sts-loopback';
import { RoundWorkspaces, type RoundRef } from '../../activities/workspace';
import { createDb } from '../../shared/infra/db';
import { createCloudConnection } from '../../shared/infra/db/runners';
import { cloudConnectionSchema, type CloudConnectionSpec } from '../../shared/runner-contracts';
import { GOOGLE_AUTH_ORIGINS, googleCredentialProblem } from '../../shared/google-credentials';
import { secretBoxFromEnv, type SecretBox } from '../../shared/infra/secret-box';
import { federationCredential, startGcpLoopback } from '../support/gcp-loopback';
import { SECRET_MARKER } from '../support/secret-scan';
import { createUser } from '../../shared/infra/db/users';
import { sessionBranch } from '../../shared/ids';
import { engineDeps, gitClient, seedRepository, stack } from '../support/stack';
import { awsEngineEnv, TEST_ENGINE_AWS_SECRET } from '../support/test-stack';
import { insertSessionRow } from '../support/api';

const root = mkdtempSync(join(tmpdir(), 'kumoss-cloud-credentials-'));

/** The worker's own credentials for the other clouds (a run with credentials of its own gets none). */
const WORKER_OTHER_CLOUDS = {
  GOOGLE_APPLICATION_CREDENTIALS: '/etc/kumoss/worker-google.json',
  GOOGLE_OAUTH_ACCESS_TOKEN: `${SECRET_MARKER}-worker-google-token`,
  ARM_CLIENT_SECRET: `${SECRET_MARKER}-worker-azure-secret`,
  OCI_PRIVATE_KEY: `${SECRET_MARKER}-worker-oci-key`,
  KUBECONFIG: '/etc/kumoss/worker-kubeconfig',
};
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("a run's own cloud credentials", () => {
  const s = stack();
  const db = createDb(s.databaseUrl, { max: 2 });
  afterAll(() => db.destroy());
  const sts = (
    credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } = {
      accessKeyId: 'kumoss-emulator',
      secretAccessKey: 'kumoss-emulator',
    },
  ) => new STSClient({ region: 'us-east-1', endpoint: s.awsEndpoint, credentials });
  const box = secretBoxFromEnv() as SecretBox;
  // Google endpoints a stored credential may name besides Google's own (the worker's runners.gcp.endpoint_url).
  const googleEndpoints: string[] = [];
  const credentials = new CloudCredentials({
    db,
    durationSeconds: 900,
    sts: () => sts(),
    box,
    googleEndpoints,
  });
  const deps = {
    ...engineDeps(),
    // The worker's own cloud variables (the emulator's keys stand for its instance credentials), and
    // its credentials for the other clouds.
    env: { ...awsEngineEnv(s.awsEndpoint), ...WORKER_OTHER_CLOUDS },
    cloudCredentials: credentials,
  };
  const workspaces = new RoundWorkspaces(
    join(root, 'work'),
    gitClient(),
    { terraform: deps, tofu: deps },
    'terraform',
  );
  const url = seedRepository(root, `team/environ-${Date.now()}`, {
    'main.tf': 'output "environ" { value = filebase64("/proc/self/environ") }\n',
  });

  /** An organization (with a role for aws, or none) and a session of it on the probe root. */
  const organization = async (role?: string, connection?: CloudConnectionSpec) => {
    const name = `creds-${randomUUID().slice(0, 8)}`;
    const { user, token } = await createUser(db, {
      name: `devops-${name}`,
      role: 'devops',
      organization: name,
    });
    if (role)
      await createCloudConnection(db, user.organization_uuid, {
        name: 'engine',
        provider: 'aws',
        region: 'eu-west-1',
        role_arn: `arn:aws:iam::123456789012:role/${role}`,
      });
    if (connection) await createCloudConnection(db, user.organization_uuid, connection, box);
    const { sessionId } = await insertSessionRow(db, token, {
      session_id: `s-creds-${randomUUID().slice(0, 8)}`,
      repository_url: url,
      scope_id: 'acct',
    });
    return sessionId;
  };

  /** What the root reads from its environment in a plan of `sessionId`'s round r-1. */
  const environ = async (
    sessionId: string,
    cloud: RoundRef['cloud'] = 'aws',
  ): Promise<Record<string, string>> => {
    const ref: RoundRef = {
      sessionId,
      roundId: 'r-1',
      repositoryUrl: url,
      iacPath: '',
      scopeId: 'acct',
      cloud,
      branch: sessionBranch(sessionId),
      engine: 'terraform',
    };
    const ws = await workspaces.get(ref);
    const plan = join(ws.scratch, 'probe.tfplan');
    await ws.engine.plan({ out: plan });
    await ws.engine.showJson(plan, `${plan}.json`);
    const json = JSON.parse(readFileSync(`${plan}.json`, 'utf8')) as {
      planned_values: { outputs: { environ: { value: string } } };
    };
    const text = Buffer.from(json.planned_values.outputs.environ.value, 'base64').toString('utf8');
    return Object.fromEntries(
      text
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
  };

  it("holds its organization's role's temporary credentials, never the worker's, and another organization's run has its own", async () => {
    const [a, b, plain] = [
      await organization('kumoss-a'),
      await organization('kumoss-b'),
      await organization(),
    ];
    const envA = await environ(a);
    const envB = await environ(b);
    for (const env of [envA, envB]) {
      expect(env.AWS_ACCESS_KEY_ID).toBeDefined();
      expect(env.AWS_ACCESS_KEY_ID).not.toBe('kumoss-emulator');
      expect(env.AWS_SECRET_ACCESS_KEY).not.toBe(TEST_ENGINE_AWS_SECRET);
      expect(env.AWS_SESSION_TOKEN?.length).toBeGreaterThan(0);
      expect(env.AWS_REGION).toBe('eu-west-1');
      expect(Object.values(env)).not.toContain('kumoss-emulator');
      expect(Object.values(env)).not.toContain(TEST_ENGINE_AWS_SECRET);
    }
    expect(envB.AWS_ACCESS_KEY_ID).not.toBe(envA.AWS_ACCESS_KEY_ID);
    expect(envB.AWS_SESSION_TOKEN).not.toBe(envA.AWS_SESSION_TOKEN);

    // The credentials are the role's, in a session named after the run.
    const who = await sts({
      accessKeyId: envA.AWS_ACCESS_KEY_ID ?? '',
      secretAccessKey: envA.AWS_SECRET_ACCESS_KEY ?? '',
      sessionToken: envA.AWS_SESSION_TOKEN ?? '',
    }).send(new GetCallerIdentityCommand({}));
    expect(who.Arn).toBe(`arn:aws:sts::123456789012:assumed-role/kumoss-a/${roleSessionName(`${a}-r-1`)}`);

    // An organization without a connection for the cloud: no credential at all, never the worker's.
    const none = await environ(plain);
    expect(none.AWS_ACCESS_KEY_ID).toBeUndefined();
    expect(none.AWS_SECRET_ACCESS_KEY).toBeUndefined();
  });

  it('without a connection for its cloud — aws, kubernetes, azure, gcp — a run holds no credential, and none of the worker’s', async () => {
    const plain = await organization();
    for (const cloud of ['aws', 'kubernetes', 'azure', 'gcp'] as const) {
      const env = await environ(plain, cloud);
      noneOfTheWorkers(env);
      const credentials = Object.keys(env).filter((k) => WORKER_CLOUD_CREDENTIALS.test(k));
      expect(credentials, cloud).toEqual([]);
      // Settings are not credentials: the endpoint the worker is configured with stays.
      expect(env.AWS_ENDPOINT_URL, cloud).toBe(s.awsEndpoint);
    }
    // What the run says when the engine fails for want of them.
    expect(
      await credentials.forRun({ organization_uuid: randomUUID(), cloud: 'gcp', run: 'x' }),
    ).toMatchObject({
      env: {},
      missing: expect.stringContaining('no gcp cloud connection') as unknown,
    });
  });

  it("another organization naming a role of the first is refused by STS: AssumeRole carries the run's organization as the external id", async () => {
    const roleA = 'arn:aws:iam::123456789012:role/kumoss-org-a';
    const orgOf = async (role: string) => {
      const name = `deputy-${randomUUID().slice(0, 8)}`;
      const { user } = await createUser(db, { name: `admin-${name}`, role: 'admin', organization: name });
      await createCloudConnection(db, user.organization_uuid, {
        name: 'engine',
        provider: 'aws',
        region: 'eu-west-1',
        role_arn: role,
      });
      return user.organization_uuid;
    };
    const [a, b] = [await orgOf(roleA), await orgOf(roleA)];
    // The role's trust policy names organization A (the README's trust policy), as AWS enforces it.
    const trust = await startStsLoopback({ [roleA]: a });
    try {
      const checked = new CloudCredentials({
        db,
        durationSeconds: 900,
        sts: () =>
          new STSClient({
            region: 'us-east-1',
            endpoint: trust.endpoint,
            credentials: { accessKeyId: 'worker', secretAccessKey: 'worker' },
          }),
      });
      const own = await checked.forRun({ organization_uuid: a, cloud: 'aws', run: 's-a-r-1' });
      expect(own.env.AWS_SESSION_TOKEN?.length).toBeGreaterThan(0);
      await expect(checked.forRun({ organization_uuid: b, cloud: 'aws', run: 's-b-r-1' })).rejects.toThrow(
        /not authorized to perform: sts:AssumeRole/,
      );
      expect(trust.requests.map((r) => r.externalId)).toEqual([a, b]);
    } finally {
      await trust.close();
    }
  });

  /** No value of the worker's own cloud credentials, of any cloud, is in `env`. */
  const noneOfTheWorkers = (env: Record<string, string>) => {
    const values = Object.values(env);
    for (const v of ['kumoss-emulator', TEST_ENGINE_AWS_SECRET, ...Object.values(WORKER_OTHER_CLOUDS)])
      expect(values).not.toContain(v);
    expect(env.GOOGLE_APPLICATION_CREDENTIALS).toBeUndefined();
  };

  it('holds the static credentials an admin stored for its cloud (AWS keys, Azure, OCI), and nothing of the worker’s', async () => {
    const awsSecret = `${SECRET_MARKER}-static-aws`;
    const aws = await environ(
      await organization(undefined, {
        name: 'engine',
        provider: 'aws',
        region: 'eu-central-1',
        credentials: { access_key_id: 'AKIASTATICKEY', secret_access_key: awsSecret },
      }),
    );
    expect(aws).toMatchObject({
      AWS_ACCESS_KEY_ID: 'AKIASTATICKEY',
      AWS_SECRET_ACCESS_KEY: awsSecret,
      AWS_REGION: 'eu-central-1',
    });
    expect(aws.AWS_SESSION_TOKEN).toBeUndefined();
    noneOfTheWorkers(aws);

    const azureSecret = `${SECRET_MARKER}-azure-client-secret`;
    const azure = await environ(
      await organization(undefined, {
        name: 'engine',
        provider: 'azure',
        region: 'westeurope',
        credentials: {
          client_id: 'c0ffee00-0000-4000-8000-000000000001',
          client_secret: azureSecret,
          tenant_id: 'c0ffee00-0000-4000-8000-000000000002',
          subscription_id: 'c0ffee00-0000-4000-8000-000000000003',
        },
      }),
      'azure',
    );
    expect(azure).toMatchObject({
      ARM_CLIENT_ID: 'c0ffee00-0000-4000-8000-000000000001',
      ARM_CLIENT_SECRET: azureSecret,
      ARM_TENANT_ID: 'c0ffee00-0000-4000-8000-000000000002',
      ARM_SUBSCRIPTION_ID: 'c0ffee00-0000-4000-8000-000000000003',
    });
    // The worker's AWS keys are gone too: a run holds its own credentials and nothing else.
    expect(azure.AWS_ACCESS_KEY_ID).toBeUndefined();
    noneOfTheWorkers(azure);

    const oci = await environ(
      await organization(undefined, {
        name: 'engine',
        provider: 'oci',
        region: 'eu-frankfurt-1',
        credentials: {
          tenancy_ocid: 'ocid1.tenancy.oc1..kumoss',
          user_ocid: 'ocid1.user.oc1..kumoss',
          fingerprint: '20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34',
          private_key: `-----BEGIN PRIVATE KEY-----\n${SECRET_MARKER}-oci\n-----END PRIVATE KEY-----`,
        },
      }),
      'oci',
    );
    expect(oci).toMatchObject({
      OCI_TENANCY_OCID: 'ocid1.tenancy.oc1..kumoss',
      OCI_REGION: 'eu-frankfurt-1',
    });
    expect(oci.OCI_PRIVATE_KEY).toContain(`${SECRET_MARKER}-oci`);
    noneOfTheWorkers(oci);

    // The stored credentials are sealed in the metadata store, bound to their connection.
    const rows = await db.selectFrom('cloud_connections').select('credentials_sealed').execute();
    const sealed = rows.map((r) => r.credentials_sealed ?? '').join('\n');
    expect(sealed).toMatch(/v1:/);
    expect(sealed).not.toContain(awsSecret);
    expect(sealed).not.toContain(azureSecret);
  });

  it('gets a short-lived Google access token from the connection’s workload identity federation credential', async () => {
    const subjectToken = `subject-${randomUUID()}`;
    const gcp = await startGcpLoopback({ token: 'unused', sts: { subjectToken, lifetimeSeconds: 3600 } });
    try {
      const tokenFile = join(root, `subject-${randomUUID().slice(0, 6)}`);
      writeFileSync(tokenFile, subjectToken);
      const federation: CloudConnectionSpec = {
        name: 'engine',
        provider: 'gcp',
        region: 'europe-west1',
        project_id: 'kumoss-engine-1',
        credentials: {
          credential_json: JSON.stringify(federationCredential(gcp, tokenFile)),
        },
      };
      // While the token service is not a Google endpoint of this worker, the configuration is
      // refused before its subject token is read: the worker's files never go to another server.
      await expect(environ(await organization(undefined, federation), 'gcp')).rejects.toThrow(
        /the connection's Google credential cannot be used: token_url must be on https:\/\/sts\.googleapis\.com/,
      );
      expect(gcp.issued).toHaveLength(0);
      googleEndpoints.push(new URL(gcp.url).origin);
      const session = await organization(undefined, federation);
      const env = await environ(session, 'gcp');
      expect(gcp.issued).toHaveLength(1);
      expect(env).toMatchObject({
        GOOGLE_OAUTH_ACCESS_TOKEN: gcp.issued[0],
        GOOGLE_PROJECT: 'kumoss-engine-1',
        GOOGLE_REGION: 'europe-west1',
      });
      noneOfTheWorkers(env);
    } finally {
      await gcp.close();
    }
  });

  it('refuses a Google credential that would fetch its subject token from a URL or a command, or send it elsewhere', () => {
    const base = {
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: 'https://sts.googleapis.com/v1/token',
    };
    expect(
      googleCredentialProblem(
        { ...base, credential_source: { file: '/var/run/token' } },
        GOOGLE_AUTH_ORIGINS,
      ),
    ).toBe(undefined);
    expect(
      googleCredentialProblem({ ...base, credential_source: { url: 'http://169.254.169.254/token' } }),
    ).toMatch(/from a file/);
    expect(
      googleCredentialProblem({ ...base, credential_source: { executable: { command: 'cat /etc/shadow' } } }),
    ).toMatch(/from a file/);
    expect(
      googleCredentialProblem(
        {
          ...base,
          token_url: 'https://attacker.example/token',
          credential_source: { file: '/var/run/token' },
        },
        GOOGLE_AUTH_ORIGINS,
      ),
    ).toMatch(/^token_url must be on https:\/\/sts\.googleapis\.com/);
    expect(
      googleCredentialProblem(
        {
          type: 'service_account',
          client_email: 'a@b',
          private_key: 'k',
          token_uri: 'https://evil.example/t',
        },
        GOOGLE_AUTH_ORIGINS,
      ),
    ).toMatch(/^token_uri must be on/);
    expect(googleCredentialProblem({ type: 'authorized_user' })).toMatch(
      /service_account key or an external_account/,
    );
    // The API refuses the shape at once (the URLs are checked again on the worker).
    const spec = cloudConnectionSchema.safeParse({
      name: 'g',
      provider: 'gcp',
      region: 'europe-west1',
      project_id: 'kumoss-engine-1',
      credentials: {
        credential_json: JSON.stringify({ ...base, credential_source: { url: 'http://169.254.169.254/' } }),
      },
    });
    expect(spec.success).toBe(false);
  });

  it('names the role session after the run, within what STS accepts', () => {
    expect(roleSessionName('s-0f3c2a9e-1b7d-4c55-9a51-0a1b2c3d4e5f-r-1a2b3c4d')).toMatch(
      /^[\w+=,.@-]{1,64}$/,
    );
    expect(roleSessionName('stack run/with spaces')).toBe('kumoss-stack-run-with-spaces');
  });
});
