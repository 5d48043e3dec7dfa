// Records workflow histories for the replay test (test/workflows/replay.test.ts): a full and a
// partial drift round, a full round of one operation a group (targeted plans, the leftover groups,
// the whole root's plan), a session and both runner DAGs, run on the real stack, saved as binary
// protobuf under test/fixtures/histories. Re-record when a workflow changes compatibly in a way the
// recorded runs do not exercise, or once an incompatible change has shipped behind a patch and no
// run without its marker is left (docs/api.md, "Shipping a workflow change"). Names after `--`
// record only a round in groups under each name (`npm run record-histories -- drift-round-proposals`).
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { startStackWorker, startTestStack } from './test-stack';
import { join } from 'node:path';
import proto from '@temporalio/proto';
import { projectRoot } from '../../shared/infra/config';
import { quietKnownWarnings } from '../../shared/infra/logger';
import { sessionWorkflowId } from '../../shared/ids';
import { createDriftTestBed } from './drift-test-bed';
import { driftRound, session } from '../../workflows';
import { operationUpdate, sessionQuery } from '../../shared/messages';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { DeleteClusterCommand } from '@aws-sdk/client-ecs';
import type { RunnerDagState } from '../../shared/runner-contracts';
import { awsEnvironment, gceEnvironment, provisionAws, startRunnerBed } from './runner-bed';
import { recordGroupsRound } from './record-groups-round';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const out = join(projectRoot, 'test', 'fixtures', 'histories');
const { stack, stop } = await startTestStack();
try {
  const sw = await startStackWorker(stack, 'record');
  const { client, git, engine } = sw;
  // Binary protobuf: the JSON route (historyFromJSON) trips over two copies of protobufjs that
  // npm installs side by side for @temporalio/common and @temporalio/proto.
  const save = async (name: string, workflowId: string, c = client) => {
    const history = await c.workflow.getHandle(workflowId).fetchHistory();
    writeFileSync(join(out, `${name}.binpb`), proto.temporal.api.history.v1.History.encode(history).finish());
    console.log(`recorded ${name} (${history.events?.length ?? 0} events)`);
  };
  // `record-histories -- drift-round-proposals`: only the round in groups, under that name.
  const only = process.argv.slice(2);
  if (only.length > 0) {
    for (const name of only) await recordGroupsRound(client, git, engine, stack.gitHostUrl, save, name);
    await sw.stop();
    await stop();
    process.exit(0);
  }
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
  await recordGroupsRound(client, git, engine, stack.gitHostUrl, save);
  // A session: a round, a second request while it runs (refused by the update's validator), then
  // apply without a plan, which fails the session and ends its workflow.
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
  await client.workflow.executeUpdateWithStart(operationUpdate, {
    args: [{ round_id: 'r1', kind: 'full', text: 'Reconcile everything.' }],
    updateId: 'r1',
    startWorkflowOperation: new WithStartWorkflowOperation(session, {
      workflowId: sessionWorkflowId(sid),
      taskQueue: 'record',
      args: [{ settings }],
      workflowIdConflictPolicy: 'FAIL',
    }),
  });
  const handle = client.workflow.getHandle<typeof session>(sessionWorkflowId(sid));
  await handle
    .executeUpdate(operationUpdate, {
      args: [{ round_id: 'r2', kind: 'full', text: 'Again.' }],
      updateId: 'r2',
    })
    .catch(() => undefined);
  for (;;) {
    const s = await handle.query(sessionQuery);
    if (s.round_count >= 1 && !s.in_flight) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await handle.executeUpdate(operationUpdate, { args: [{ round_id: 'r3', kind: 'apply' }], updateId: 'r3' });
  await handle.result();
  await save('session', sessionWorkflowId(sid));
  await bed.destroy();
  await sw.stop();

  // Both runner DAGs: a detect that finds drift and chains the repair (which completes), and a
  // repair whose failing step is compensated.
  const runners = await startRunnerBed(stack.databaseUrl);
  const rw = await startStackWorker(stack, 'record-runner', { runners: runners.deps });
  try {
    const org = await runners.organization();
    const aws = await runners.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(runners.awsClients(aws.region), env);
    await runners
      .awsClients(aws.region)
      .ecs.send(new DeleteClusterCommand({ cluster: env.ecs_cluster.name }));
    const group = await runners.group(org, aws, env);
    const detectId = `record-detect-${randomUUID().slice(0, 8)}`;
    const detected = (await rw.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: 'record-runner',
      workflowId: detectId,
      args: [{ runner_group_uuid: group.runner_group_uuid, organization_uuid: org, auto_apply: true }],
    })) as RunnerDagState;
    await rw.client.workflow.getHandle(detected.repair_workflow_id ?? '').result();
    await save('runner-detect', detectId, rw.client);
    await save('runner-repair', detected.repair_workflow_id ?? '', rw.client);

    const gcp = await runners.connection(org, 'gcp');
    const gce = gceEnvironment();
    gce.instance_template.machine_type = 'e2-imaginary';
    const broken = await runners.group(org, gcp, gce);
    const failing = (await rw.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: 'record-runner',
      workflowId: `record-detect-${randomUUID().slice(0, 8)}`,
      args: [{ runner_group_uuid: broken.runner_group_uuid, organization_uuid: org, auto_apply: true }],
    })) as RunnerDagState;
    await rw.client.workflow
      .getHandle(failing.repair_workflow_id ?? '')
      .result()
      .catch(() => undefined);
    await save('runner-repair-compensated', failing.repair_workflow_id ?? '', rw.client);
  } finally {
    await rw.stop();
    await runners.close();
  }
} finally {
  await stop();
}
