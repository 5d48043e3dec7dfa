// `npm run demo`: the seed's example on the running system. Creates the example root on the git
// host — an aws_security_group named by its Name tag sg-web-demo, applied with kumoss/aws (the
// double of hashicorp/aws) into the embedded AWS emulator — opens port 8080 on it through the EC2
// API as a person in the console would, runs "Resolve the drift on security group sg-web-demo; someone opened port 8080 in the
// console." as a partial drift round, shows its progress, then prints the report and the Web UI
// link of the run. Uses the stack of `npm start` when it is up, else starts it for the demo.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { ArtifactStore, createS3Client } from '../shared/infra/object-store';
import { GitClient } from '../activities/git';
import { gitTrustBundle, loadConfig, projectRoot } from '../shared/infra/config';
import { connectClient, temporalTarget } from '../shared/infra/temporal-connection';
import type { DriftRoundInput, DriftRoundResult } from '../shared/contracts';
import { driftRoundWorkflowId } from '../shared/ids';
import { quietKnownWarnings } from '../shared/infra/logger';
import { driftRoundSearchAttributes } from '../shared/search-attributes';
import { awsClients, createAwsTestBed, DEMO_ROOT } from '../test/support/aws-test-bed';
import { awsEngineEnv } from '../test/support/test-stack';
import { roundProgressQuery } from '../shared/messages';
import { engineDeps } from '../worker/deps';

const REQUEST = 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.';
const say = (msg: string): void => console.log(`[demo] ${msg}`);

async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
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

async function main(): Promise<void> {
  quietKnownWarnings();
  const config = loadConfig();
  const apiUrl = `http://${config.api.host}:${config.api.port}`;
  const started = await ensureStack(`${apiUrl}/health`);
  const git = new GitClient({ caFile: gitTrustBundle(config) });
  const gitHostUrl = `https://${config.git_host.host}:${config.git_host.port}`;
  const awsEndpoint =
    config.engine.aws_endpoint_url || `http://127.0.0.1:${config.runners.aws.embedded_emulator_port}`;
  say(`creating the example root on the git host and applying it into the AWS emulator at ${awsEndpoint}`);
  const bed = await createAwsTestBed({
    spec: DEMO_ROOT,
    gitHostUrl,
    git,
    engine: { ...engineDeps(config, config.engine.binary), env: awsEngineEnv(awsEndpoint) },
    name: `demo-${Date.now()}`,
  });
  const temporal = temporalTarget(config.temporal);
  const connection = await connectClient(temporal);
  try {
    say(`example root: ${bed.repoUrl}`);
    say('someone opens port 8080 on sg-web-demo in the console (EC2 AuthorizeSecurityGroupIngress)…');
    await bed.inject('sg-ingress-added', awsClients(awsEndpoint));
    const client = new Client({ connection, namespace: temporal.namespace });
    const session = `demo-${randomUUID().slice(0, 8)}`;
    const input: DriftRoundInput = {
      session_id: session,
      round_id: 'r1',
      mode: 'partial',
      repository_url: bed.repoUrl,
      iac_path: bed.iacPath,
      cloud: 'aws',
      scope_id: 'demo-account',
      text: REQUEST,
      max_drift_reports: config.orchestration.max_drift_reports,
      drift_group_operations: config.orchestration.drift_group_operations,
    };
    const workflowId = driftRoundWorkflowId(session, 'r1');
    const uiLink = `${config.temporal.ui_url}/namespaces/${config.temporal.namespace}/workflows/${encodeURIComponent(workflowId)}`;
    say(`partial drift round: "${REQUEST}"`);
    const handle = await client.workflow.start('driftRound', {
      taskQueue: config.temporal.task_queue,
      workflowId,
      args: [input],
      typedSearchAttributes: driftRoundSearchAttributes(input),
      staticSummary: `Partial drift round on ${bed.repoUrl}`,
    });
    say(`Web UI: ${uiLink}`);
    let last = '';
    const t0 = Date.now();
    const poll = setInterval(() => {
      handle
        .query(roundProgressQuery)
        .then((p) => {
          const line = `${p.status}${p.iteration ? ` · iteration ${p.iteration}/${p.max_iterations} · ${p.operations} operation(s) in ${p.groups} group(s)` : ''}`;
          if (line !== last) say(`  ${((Date.now() - t0) / 1000).toFixed(1)}s  ${line}`);
          last = line;
        })
        .catch(() => undefined);
    }, 300);
    const result = (await handle.result()) as DriftRoundResult;
    clearInterval(poll);
    say(
      `round ${result.status}: outcome ${result.outcome ?? '-'} in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
    );
    if (result.report_key) {
      const store = new ArtifactStore(createS3Client(config.storage), config.storage.bucket);
      console.log(JSON.stringify(JSON.parse(await store.getText(result.report_key)), null, 2));
      const diffs = (await store.list(`sessions/${session}/rounds/r1/`)).filter((k) =>
        k.endsWith('changes.diff'),
      );
      for (const k of diffs) console.log(await store.getText(k));
      say(`branch ${result.branch} on ${bed.repoUrl}`);
    } else {
      say(result.reason ?? '');
    }
    say(`Web UI: ${uiLink}`);
  } finally {
    await connection.close();
    await bed.destroy();
    if (started) {
      started.kill('SIGINT');
      say('stopped the stack the demo started');
    }
  }
}

main().catch((err: unknown) => {
  console.error(`[demo] failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
