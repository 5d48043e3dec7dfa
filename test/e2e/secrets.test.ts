// Secrets never reach workflow history, artifacts, logs or API responses. This file runs the
// paths that carry them — drift rounds through the API against a git host that demands GIT_TOKEN,
// the Anthropic model with its API key, runner DAGs with AWS credentials and a Google token, and
// a round that fails — then scans every history of the namespace, every artifact, everything the
// process printed, the worker's logs, the checkouts on disk and every API response.
// (global-setup.ts repeats the history and artifact scan after the last test file of the run.)
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitClient } from '../../activities/git';
import { AnthropicModel } from '../../activities/model/anthropic';
import { startGitHost, type GitHost } from '../../scripts/embedded/git-host';
import { driftScript, startMessagesLoopback, type MessagesLoopback } from '../support/anthropic-loopback';
import { roleTokens, startTestApi, waitForSession, waitForWorkflow, type TestApi } from '../support/api';
import { createDriftTestBed, type DriftTestBed } from '../support/drift-test-bed';
import { awsEnvironment, cloudRunEnvironment, startRunnerBed, type RunnerBed } from '../support/runner-bed';
import { scanForSecrets, SECRET_MARKER } from '../support/secret-scan';
import {
  engineDeps,
  stack,
  temporalHarness,
  testActivities,
  workerLogs,
  type TemporalHarness,
} from '../support/stack';

const GIT_TOKEN = `ghp_${SECRET_MARKER}-git-${randomBytes(10).toString('hex')}`;
const ANTHROPIC_API_KEY = `sk-ant-${SECRET_MARKER}-model-${randomBytes(10).toString('hex')}`;

/** Everything this process writes to stdout/stderr from now on (pino logs, warnings). */
const printed: string[] = [];
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  stream.write = (chunk: unknown, ...rest: unknown[]) => {
    printed.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    return write(chunk, ...rest);
  };
}

function filesText(dir: string, budget = { bytes: 50_000_000 }): string {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      const st = statSync(full, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(full);
      else if (st.isFile() && budget.bytes > 0) {
        budget.bytes -= st.size;
        out.push(readFileSync(full).toString('utf8'));
      }
    }
  };
  walk(dir);
  return out.join('\n');
}

describe('secrets stay out of histories, artifacts, logs and responses', () => {
  let host: GitHost;
  let hostDir: string;
  let workDir: string;
  let git: GitClient;
  let model: MessagesLoopback;
  let runners: RunnerBed;
  let h: TemporalHarness;
  let api: TestApi;
  let bed: DriftTestBed;
  let tokens: Record<string, string>;
  const responses: string[] = [];

  beforeAll(async () => {
    hostDir = mkdtempSync(join(tmpdir(), 'kumoss-secret-host-'));
    workDir = mkdtempSync(join(tmpdir(), 'kumoss-secret-ws-'));
    host = await startGitHost({
      reposDir: join(hostDir, 'git'),
      certsDir: join(hostDir, 'certs'),
      requireToken: GIT_TOKEN,
    });
    git = new GitClient({ caFile: host.caPath, hostTokens: { [host.url]: GIT_TOKEN } });
    // The worker holds no token for this host: a round gets through only with the credential its
    // organization stored on its git connection (below).
    const workerGit = new GitClient({ caFile: host.caPath });
    model = await startMessagesLoopback(driftScript);
    runners = await startRunnerBed(stack().databaseUrl);
    h = await temporalHarness(
      'secrets',
      testActivities({
        git: workerGit,
        workDir,
        runners: runners.deps,
        model: new AnthropicModel({
          apiKey: ANTHROPIC_API_KEY,
          baseURL: model.url,
          model: 'claude-test-large',
          smallModel: 'claude-test-small',
        }),
      }),
    );
    tokens = await roleTokens(runners.db, 'secrets');
    api = await startTestApi(h, runners.db);
    // The organization's admin connects the host with the organization's own token.
    const admin = (method: string, path: string, body?: unknown) =>
      api.call(method, path, tokens.admin, body);
    const listed = await admin('GET', '/api/v1/admin/connections/git');
    for (const c of listed.body.git_connections as { git_connection_uuid: string; origin: string }[])
      if (c.origin === host.url)
        await admin('DELETE', `/api/v1/admin/connections/git/${c.git_connection_uuid}`);
    const connected = await admin('POST', '/api/v1/admin/connections/git', {
      origin: host.url,
      kind: 'git',
      credential: GIT_TOKEN,
    });
    expect(connected.status).toBe(201);
    responses.push(
      JSON.stringify(connected.body),
      JSON.stringify((await admin('GET', '/api/v1/admin/connections/git')).body),
    );
    bed = await createDriftTestBed({ gitHostUrl: host.url, git, engine: engineDeps() });
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await h?.close();
    await runners?.close();
    await model?.close();
    await host?.close();
    rmSync(hostDir, { recursive: true, force: true });
    rmSync(workDir, { recursive: true, force: true });
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const r = await api.call(method, path, tokens.devops, body);
    responses.push(`${method} ${path} ${r.status} ${JSON.stringify(r.body)}`);
    return r;
  };

  it('the git host really demands the token', async () => {
    const anonymous = new GitClient({ caFile: host.caPath });
    await expect(anonymous.remoteBranches(bed.repoUrl)).rejects.toThrow();
    await expect(git.remoteBranches(bed.repoUrl)).resolves.toBeTruthy();
  });

  it('runs the secret-carrying paths, then finds no secret anywhere', async () => {
    await bed.inject('ingress');
    await bed.inject('attribute');
    // A partial round through the Anthropic SDK, a push with the token, a follow-up.
    const first = await call('POST', '/api/v1/drift/partial', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: '123456789012',
      text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
    });
    expect(first.status).toBe(202);
    const sid = String(first.body.session_id);
    const one = await waitForSession(api, tokens.developer ?? '', sid, 1);
    expect(one.rounds[0]?.status).toBe('completed');
    expect(
      (await call('POST', '/api/v1/drift/full', { session_id: sid, text: 'Reconcile everything.' })).status,
    ).toBe(202);
    await waitForSession(api, tokens.developer ?? '', sid, 2);
    await call('GET', `/api/v1/sessions/${sid}`);
    // A round that fails: the repository does not exist (git's error travels to the report).
    const failing = await call('POST', '/api/v1/drift/full', {
      repository_url: host.repoUrl('missing'),
      cloud: 'aws',
      scope_id: '123456789012',
      text: 'Reconcile everything.',
    });
    const failed = await waitForSession(api, tokens.developer ?? '', String(failing.body.session_id), 1);
    expect(failed.status).toBe('FAILED');
    await call('GET', `/api/v1/sessions/${String(failing.body.session_id)}`);

    // Runner DAGs with AWS credentials and a Google token, a repair included.
    // An admin stores each connection's credentials; the steps sign with those.
    const asAdmin = async (body: unknown) => {
      const r = await api.call('POST', '/api/v1/cloud-connections', tokens.admin, body);
      responses.push(JSON.stringify(r.body));
      return r;
    };
    const aws = await asAdmin({
      name: `aws-${randomUUID().slice(0, 6)}`,
      provider: 'aws',
      region: 'us-west-2',
      credentials: runners.connectionCredentials('aws'),
    });
    const gcp = await asAdmin({
      name: `gcp-${randomUUID().slice(0, 6)}`,
      provider: 'gcp',
      region: 'europe-west1',
      project_id: `kumoss-${randomUUID().slice(0, 8)}`,
      credentials: runners.connectionCredentials('gcp'),
    });
    for (const [conn, environment] of [
      [aws, awsEnvironment()],
      [gcp, cloudRunEnvironment()],
    ] as const) {
      const group = await call('POST', '/api/v1/runner-groups', {
        name: `g-${randomUUID().slice(0, 6)}`,
        cloud_connection_uuid: conn.body.cloud_connection_uuid,
        environment,
      });
      const started = await call('POST', '/api/workflows/start', {
        workflow_type: 'runner.environment-drift-detect',
        initial_data: { runner_group_uuid: group.body.runner_group_uuid, auto_apply: true },
      });
      const record = (status: number, body: Record<string, unknown>) =>
        responses.push(`GET /api/workflows ${status} ${JSON.stringify(body)}`);
      const out = await waitForWorkflow(api, tokens.devops ?? '', String(started.body.workflow_uuid), record);
      const repairId = String((out.output as Record<string, unknown>).repair_workflow_uuid);
      await waitForWorkflow(api, tokens.devops ?? '', repairId, record);
    }

    // The secrets were really used on these paths (the scan below is not vacuous).
    expect(model.requests.some((r) => r.headers.authorization === `Bearer ${ANTHROPIC_API_KEY}`)).toBe(true);
    expect(runners.gcp.requests.length).toBeGreaterThan(0);
    expect(await runners.workerCalls('us-west-2')).toBeGreaterThan(0);

    // The credential is stored, sealed (bound to the organization and host).
    const connections = await runners.db
      .selectFrom('git_connections')
      .selectAll()
      .where('origin', '=', host.url)
      .execute();
    expect(connections.some((c) => c.credential_sealed?.startsWith('v1:'))).toBe(true);
    const secrets = {
      GIT_TOKEN,
      KUMOSS_SECRETS_KEY: process.env.KUMOSS_SECRETS_KEY ?? '',
      ANTHROPIC_API_KEY,
      AWS_SECRET_ACCESS_KEY: runners.awsSecret,
      GOOGLE_OAUTH_ACCESS_TOKEN: runners.gcpToken,
    };
    const { findings, histories, objects } = await scanForSecrets(stack(), secrets, {
      'process output (logs)': printed.join(''),
      'worker runtime logs': workerLogs.join('\n'),
      'API responses': responses.join('\n'),
      'round checkouts on disk': filesText(workDir),
      'git connections in the metadata store': JSON.stringify(connections),
      planted: `a control: ${GIT_TOKEN}`,
    });
    expect(histories).toBeGreaterThan(5);
    expect(objects).toBeGreaterThan(5);
    // The scanner finds what is there (the planted control) and nothing else.
    expect(findings.filter((f) => f.where === 'planted').map((f) => f.secret)).toContain('GIT_TOKEN');
    expect(findings.filter((f) => f.where !== 'planted')).toEqual([]);
  });
});
