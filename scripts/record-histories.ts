// Records workflow histories for the replay test (test/workflows/replay.test.ts): a full and a
// partial drift round and a session, run on the real stack, saved as JSON under
// test/fixtures/histories. Re-record only when a change to a workflow is meant to be
// incompatible with runs already in flight (and then version it instead where you can).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createActivities } from '../activities';
import { ArtifactStore, createS3Client } from '../activities/artifacts';
import { GitClient } from '../activities/git';
import { OfflineModel } from '../activities/model/offline';
import { PromptCatalogue } from '../activities/prompt-catalogue';
import { RoundWorkspaces } from '../activities/workspace';
import { projectRoot } from '../shared/config';
import { sessionWorkflowId } from '../shared/ids';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startTestStack } from '../test/support/test-stack';
import { driftRound, session } from '../workflows';
import { operationSignal, sessionQuery } from '../workflows/session';
import { createWorker } from '../worker/worker';
import { cliConfigPath, toolPath } from './tools.mjs';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const out = join(projectRoot, 'test', 'fixtures', 'histories');
const { stack, stop } = await startTestStack();
try {
  const git = new GitClient({ caFile: stack.gitCaFile });
  const artifacts = new ArtifactStore(
    createS3Client({ endpoint: stack.s3Endpoint, bucket: stack.bucket, region: 'us-east-1' }),
    stack.bucket,
  );
  const engine = {
    kind: 'terraform' as const,
    binary: toolPath('terraform'),
    cliConfigFile: cliConfigPath(),
    timeoutMs: 600_000,
  };
  const engines = { terraform: engine, tofu: { ...engine, kind: 'tofu' as const, binary: toolPath('tofu') } };
  const native = await NativeConnection.connect({ address: stack.temporalAddress });
  const worker = await createWorker({
    connection: native,
    namespace: 'default',
    taskQueue: 'record',
    activities: createActivities({
      engine,
      git,
      artifacts,
      model: new OfflineModel(),
      catalogue: new PromptCatalogue(join(projectRoot, 'prompts')),
      workspaces: new RoundWorkspaces(mkdtempSync(join(tmpdir(), 'kumoss-rec-')), git, engines, 'terraform'),
    }),
    workflowBundlePath: stack.workflowBundlePath,
  });
  const running = worker.run();
  const client = new Client({ connection: await Connection.connect({ address: stack.temporalAddress }) });
  // Binary protobuf: the JSON route (historyFromJSON) trips over two copies of protobufjs that
  // npm installs side by side for @temporalio/common and @temporalio/proto.
  const save = async (name: string, workflowId: string) => {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    writeFileSync(join(out, `${name}.binpb`), proto.temporal.api.history.v1.History.encode(history).finish());
    console.log(`recorded ${name} (${history.events?.length ?? 0} events)`);
  };
  const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git, engine });
  await bed.inject('attribute');
  await bed.inject('ingress');
  await bed.inject('file');
  for (const mode of ['full', 'partial'] as const) {
    const id = `record-${mode}-${randomUUID().slice(0, 8)}`;
    await client.workflow.execute(driftRound, {
      taskQueue: 'record',
      workflowId: id,
      args: [
        {
          session_id: `rec-${mode}`,
          round_id: 'r1',
          mode,
          repository_url: bed.repoUrl,
          cloud: 'aws',
          scope_id: 'record',
          text:
            mode === 'full' ? 'Reconcile everything.' : 'Resolve the drift on security group sg-web-demo.',
        },
      ],
    });
    await save(`drift-round-${mode}`, id);
  }
  // A session: a round, a second request while it runs (dropped), then apply without a plan.
  const sid = `rec-session-${randomUUID().slice(0, 8)}`;
  const settings = {
    session_id: sid,
    organization_uuid: '00000000-0000-0000-0000-000000000000',
    repository_url: bed.repoUrl,
    cloud: 'aws' as const,
    scope_id: 'record',
    iac_path: '',
    state_project_id: 'record',
    branch: `kumoss/${sid}`,
    max_drift_reports: 3,
    drift_group_operations: 8,
  };
  const handle = await client.workflow.signalWithStart(session, {
    workflowId: sessionWorkflowId(sid),
    taskQueue: 'record',
    args: [{ settings }],
    signal: operationSignal,
    signalArgs: [{ round_id: 'r1', kind: 'full', text: 'Reconcile everything.' }],
  });
  await handle.signal(operationSignal, { round_id: 'r2', kind: 'full', text: 'Again.' });
  for (;;) {
    const s = await handle.query(sessionQuery);
    if (s.rounds.length >= 1 && !s.in_flight) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await handle.signal(operationSignal, { round_id: 'r3', kind: 'apply' });
  for (;;) {
    const s = await handle.query(sessionQuery);
    if (s.status === 'FAILED') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await handle.terminate('recorded');
  await save('session', sessionWorkflowId(sid));
  await bed.destroy();
  worker.shutdown();
  await running;
} finally {
  await stop();
}
