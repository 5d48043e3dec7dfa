// A run's cloud credentials are its own (issue 26 item 2): a root that reads `/proc/self/environ`
// finds the temporary credentials of its organization's role — assumed by the worker through STS,
// in a session named after the run — and not the worker's own keys; another organization's run gets
// other credentials. Real terraform in the real sandbox, moto's STS through the real AWS SDK.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { afterAll, describe, expect, it } from 'vitest';
import { CloudCredentials, roleSessionName } from '../../activities/cloud-credentials';
import { RoundWorkspaces, type RoundRef } from '../../activities/workspace';
import { createDb } from '../../shared/db';
import { createCloudConnection } from '../../shared/db/runners';
import { createUser } from '../../shared/db/users';
import { sessionBranch } from '../../shared/ids';
import { engineDeps, gitClient, seedRepository, stack } from '../support/stack';
import { awsEngineEnv, TEST_ENGINE_AWS_SECRET } from '../support/test-stack';
import { insertSessionRow } from '../support/api';

const root = mkdtempSync(join(tmpdir(), 'kumoss-cloud-credentials-'));
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
  const credentials = new CloudCredentials({ db, durationSeconds: 900, sts: () => sts() });
  const deps = {
    ...engineDeps(),
    // The worker's own cloud variables (the emulator's keys stand for its instance credentials).
    env: awsEngineEnv(s.awsEndpoint),
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
  const organization = async (role?: string) => {
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
    const { sessionId } = await insertSessionRow(db, token, {
      session_id: `s-creds-${randomUUID().slice(0, 8)}`,
      repository_url: url,
      scope_id: 'acct',
    });
    return sessionId;
  };

  /** What the root reads from its environment in a plan of `sessionId`'s round r-1. */
  const environ = async (sessionId: string): Promise<Record<string, string>> => {
    const ref: RoundRef = {
      sessionId,
      roundId: 'r-1',
      repositoryUrl: url,
      iacPath: '',
      scopeId: 'acct',
      cloud: 'aws',
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

    // An organization without a role for the cloud runs with the worker's cloud variables.
    const worker = await environ(plain);
    expect(worker.AWS_ACCESS_KEY_ID).toBe('kumoss-emulator');
    expect(worker.AWS_SECRET_ACCESS_KEY).toBe(TEST_ENGINE_AWS_SECRET);
  });

  it('names the role session after the run, within what STS accepts', () => {
    expect(roleSessionName('s-0f3c2a9e-1b7d-4c55-9a51-0a1b2c3d4e5f-r-1a2b3c4d')).toMatch(
      /^[\w+=,.@-]{1,64}$/,
    );
    expect(roleSessionName('stack run/with spaces')).toBe('kumoss-stack-run-with-spaces');
  });
});
