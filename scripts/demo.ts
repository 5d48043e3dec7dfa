// `npm run demo`: the seed's example as a user lives it, on the running system and through the
// HTTP API. It pushes the example root — an aws_security_group named by its Name tag sg-web-demo,
// for kumoss/aws (the double of hashicorp/aws) — to the embedded forge (Gitea), applies it into
// the embedded AWS emulator with Kumoss-managed state, opens port 8080 on it through the EC2 API as
// a person in the console would, then, as a devops user of organization "default": starts a
// partial drift round (POST /api/v1/drift/partial), follows the session until the round ends,
// prints its report and diff, asks for the pull request (POST …/pull-request) and ends at the
// pull request's page on Gitea. Uses the stack of `npm start` when it is up, else starts it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AuthorizeSecurityGroupIngressCommand,
  DescribeSecurityGroupsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { EngineClient } from '../activities/engine';
import { GitClient } from '../activities/git';
import { MANAGED_BACKEND_FILE } from '../activities/managed-state';
import { sessionDetailSchema, type SessionDetail } from '../shared/contracts';
import { sessionWorkflowId } from '../shared/ids';
import { dataDir, databaseUrl, gitTrustBundle, loadConfig, projectRoot } from '../shared/infra/config';
import { createDb } from '../shared/infra/db';
import { stateProjectId } from '../shared/infra/db/sessions';
import { createUser } from '../shared/infra/db/users';
import { quietKnownWarnings } from '../shared/infra/logger';
import { toolReady } from '../shared/infra/tools.mjs';
import { engineDeps, managedState } from '../worker/deps';

const REQUEST = 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.';
const SCOPE = '123456789012';
const IAC_PATH = 'envs/demo';
const say = (msg: string): void => console.log(`[demo] ${msg}`);

const ROOT = (suffix: string) => `terraform {
  required_version = ">= 1.5.0"
  required_providers {
    aws = {
      source  = "kumoss/aws"
      version = "0.1.0"
    }
  }
}

provider "aws" {
  region = "us-east-1"
}

resource "aws_security_group" "web" {
  name        = "web-${suffix}"
  description = "web tier"

  # HTTPS from anywhere
  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  tags = {
    Name = "sg-web-demo"
  }
}
`;

async function healthy(url: string): Promise<{ components: { name: string; ok: boolean }[] } | undefined> {
  try {
    const r = await fetch(url);
    return r.ok ? ((await r.json()) as { components: { name: string; ok: boolean }[] }) : undefined;
  } catch {
    return undefined;
  }
}

async function ensureStack(healthUrl: string): Promise<ChildProcess | undefined> {
  if (await healthy(healthUrl)) {
    say('using the running stack');
    return undefined;
  }
  say('no running stack found: starting `npm start` for the demo (its output goes to .kumoss/logs)');
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
    cwd: projectRoot,
    stdio: 'ignore',
  });
  const deadline = Date.now() + 180_000;
  while (!(await healthy(healthUrl))) {
    if (child.exitCode !== null) throw new Error('`npm start` exited; run it by hand to see why');
    if (Date.now() > deadline) throw new Error('the stack did not become healthy in 3 minutes');
    await new Promise((r) => setTimeout(r, 1000));
  }
  return child;
}

/** A JSON call to the API as the demo's user; a non-2xx answer is an error with its body. */
function api(base: string, token: string) {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return JSON.parse(text) as T;
  };
}

async function main(): Promise<void> {
  quietKnownWarnings();
  const config0 = loadConfig();
  // The engine here applies into the emulator the worker's engine plans against.
  if (!config0.engine.aws_endpoint_url)
    process.env.KUMOSS_ENGINE_AWS_ENDPOINT_URL = `http://127.0.0.1:${config0.runners.aws.embedded_emulator_port}`;
  const config = loadConfig();
  const apiUrl = `http://${config.api.host}:${config.api.port}`;
  if (!config.services.gitea.url && !toolReady('gitea'))
    throw new Error(
      'the embedded forge (Gitea) is still being built in the background (first start only); run the demo once `npm start` reports it',
    );
  const started = await ensureStack(`${apiUrl}/health`);
  const health = await healthy(`${apiUrl}/health`);
  if (!health?.components.some((c) => c.name === 'forge' && c.ok))
    throw new Error('the running stack has no forge (Gitea): restart `npm start` once its build is done');
  const forgeUrl =
    config.services.gitea.url || `https://${config.git_host.host}:${config.services.gitea.embedded_port}`;
  const forgeToken = readFileSync(join(dataDir(config), 'gitea', 'token'), 'utf8').trim();
  const db = createDb(databaseUrl(config), { max: 2 });
  const managed = managedState(config, db);
  const work = mkdtempSync(join(tmpdir(), 'kumoss-demo-'));
  try {
    // 1. A devops user of organization "default" (whose git connections the launcher made).
    const stamp = Date.now().toString(36);
    const { user, token } = await createUser(db, {
      name: `demo-${stamp}`,
      role: 'devops',
      organization: 'default',
    });
    say(`user ${user.name} (devops) in organization "default"`);

    // 2. The root on Gitea, applied into the emulator with the state Kumoss manages for it.
    const repoUrl = `${forgeUrl}/kumoss/demo-${stamp}.git`;
    const repo = join(work, 'repo');
    const rootDir = join(repo, IAC_PATH);
    mkdirSync(rootDir, { recursive: true });
    writeFileSync(join(rootDir, 'main.tf'), ROOT(stamp));
    writeFileSync(join(repo, '.gitignore'), '.terraform/\n*.tfplan\n.terraform.lock.hcl\n');
    say(
      `applying the root into the AWS emulator (${config.engine.aws_endpoint_url}) with Kumoss-managed state`,
    );
    const engine = new EngineClient({
      ...engineDeps(config, config.engine.binary, undefined, managed),
      workdir: rootDir,
      scopeId: SCOPE,
      stateProjectId: stateProjectId(user.organization_uuid, repoUrl, IAC_PATH, SCOPE),
    });
    await engine.init();
    await engine.apply();
    rmSync(join(rootDir, MANAGED_BACKEND_FILE), { force: true });
    const git = new GitClient({ caFile: gitTrustBundle(config), hostTokens: { [forgeUrl]: forgeToken } });
    await git.run(['init', '--quiet', '--initial-branch=main'], repo);
    await git.run(['add', '--all'], repo);
    await git.run(
      [
        '-c',
        'user.name=demo',
        '-c',
        'user.email=demo@kumoss.invalid',
        'commit',
        '--quiet',
        '-m',
        'The web tier',
      ],
      repo,
    );
    await git.run(['push', '--quiet', repoUrl, 'main'], repo);
    say(`root pushed to ${repoUrl} (${IAC_PATH}/main.tf)`);

    // 3. Someone opens port 8080 in the console.
    const ec2 = new EC2Client({
      endpoint: config.engine.aws_endpoint_url,
      region: 'us-east-1',
      credentials: { accessKeyId: 'kumoss-emulator', secretAccessKey: 'kumoss-emulator' },
    });
    const groups = await ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: [`web-${stamp}`] }] }),
    );
    const groupId = groups.SecurityGroups?.[0]?.GroupId;
    if (!groupId) throw new Error(`security group web-${stamp} not found in the emulator`);
    await ec2.send(
      new AuthorizeSecurityGroupIngressCommand({
        GroupId: groupId,
        IpPermissions: [
          { IpProtocol: 'tcp', FromPort: 8080, ToPort: 8080, IpRanges: [{ CidrIp: '0.0.0.0/0' }] },
        ],
      }),
    );
    say(`someone opened port 8080 on ${groupId} (sg-web-demo) through the EC2 API`);

    // 4. A partial drift round through the API.
    const call = api(apiUrl, token);
    const body = {
      repository_url: repoUrl,
      cloud: 'aws',
      scope_id: SCOPE,
      iac_path: IAC_PATH,
      text: REQUEST,
    };
    say(`POST /api/v1/drift/partial ${JSON.stringify(body)}`);
    const accepted = await call<{ session_id: string; round_id: string }>(
      'POST',
      '/api/v1/drift/partial',
      body,
    );
    say(`202 ${JSON.stringify(accepted)}`);
    const sid = accepted.session_id;
    const follow = async (roundId: string): Promise<SessionDetail> => {
      let last = '';
      const t0 = Date.now();
      for (;;) {
        const d = sessionDetailSchema.parse(await call<unknown>('GET', `/api/v1/sessions/${sid}`));
        const r = d.rounds.find((x) => x.round_id === roundId);
        const line = r?.status ?? 'accepted';
        if (line !== last) say(`  ${((Date.now() - t0) / 1000).toFixed(1)}s  round ${roundId}: ${line}`);
        last = line;
        if (r && !['started', 'filtering', 'generating', 'validating', 'report'].includes(r.status)) return d;
        if (Date.now() - t0 > 600_000) throw new Error(`round ${roundId} did not end in 10 minutes`);
        await new Promise((res) => setTimeout(res, 300));
      }
    };
    let detail = await follow(accepted.round_id);
    const round = detail.rounds.find((r) => r.round_id === accepted.round_id);
    say(`round ${round?.status}: ${round?.summary ?? round?.reason ?? round?.failure_reason ?? ''}`);
    for (const a of detail.artifacts.filter((x) => /drift-report\.json$|changes\.diff$/.test(x.key))) {
      console.log(`\n--- ${a.key}\n${await (await fetch(a.url)).text()}`);
    }
    if (round?.status !== 'completed') throw new Error('the round made no change to propose');

    // 5. The pull request, opened by the session on Gitea.
    const pr = await call<{ round_id: string }>('POST', `/api/v1/sessions/${sid}/pull-request`);
    detail = await follow(pr.round_id);
    const opened = detail.pull_request;
    if (!opened?.number) throw new Error(`no pull request: ${JSON.stringify(detail.rounds.at(-1))}`);
    const page = opened.url ?? `${forgeUrl}/kumoss/demo-${stamp}/pulls/${opened.number}`;
    say(`pull request #${opened.number} on Gitea: ${page}`);
    say(
      `session: ${apiUrl}/sessions/${sid} · Web UI: ${config.temporal.ui_url}/namespaces/${config.temporal.namespace}/workflows/${encodeURIComponent(sessionWorkflowId(sid))}`,
    );
    say(`sign in to the web application with this user's token: ${token}`);
  } finally {
    await managed?.server.close();
    await db.destroy();
    rmSync(work, { recursive: true, force: true });
    if (started) {
      started.kill('SIGINT');
      say('stopped the stack the demo started');
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`[demo] failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
