// The runner environment drift DAG on the real stack: Temporal dev server, moto_server (AWS) and
// the loopback Google APIs, the metadata store.
import { DeleteLogGroupCommand, PutRetentionPolicyCommand } from '@aws-sdk/client-cloudwatch-logs';
import {
  DeleteClusterCommand,
  DescribeClustersCommand,
  RegisterTaskDefinitionCommand,
} from '@aws-sdk/client-ecs';
import { DeleteSecretCommand } from '@aws-sdk/client-secrets-manager';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { getPlan } from '../../shared/infra/db/runners';
import type { RunnerDagState, RunnerEnvironment } from '../../shared/runner-contracts';
import {
  awsEnvironment,
  cloudRunEnvironment,
  gceEnvironment,
  provisionAws,
  provisionGcp,
  startRunnerBed,
  type RunnerBed,
} from '../support/runner-bed';
import { stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

/** moto writes its recording right after answering: give it a moment. */
async function eventually(check: () => Promise<void>): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return await check();
    } catch (err) {
      if (i >= 20) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('runner.environment-drift-detect', () => {
  let bed: RunnerBed;
  let h: TemporalHarness;
  let org: string;

  beforeAll(async () => {
    bed = await startRunnerBed(stack().databaseUrl);
    h = await temporalHarness('runner-dag', testActivities({ runners: bed.deps }));
    org = await bed.organization();
  });
  afterAll(async () => {
    await h?.close();
    await bed?.close();
  });

  const detect = async (group: { runner_group_uuid: string }, extra: Record<string, unknown> = {}) =>
    (await h.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: h.taskQueue,
      workflowId: randomUUID(),
      args: [{ runner_group_uuid: group.runner_group_uuid, organization_uuid: org, ...extra }],
    })) as RunnerDagState;

  it('a clean AWS environment gives a clean plan, stored, with every step recorded', async () => {
    const conn = await bed.connection(org, 'aws', 'ca-central-1'); // a region of this test's own
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    const group = await bed.group(org, conn, env);
    const out = await detect(group);
    expect(out.status).toBe('completed');
    expect(out.plan_status).toBe('clean');
    expect(out.outcome).toBe('clean');
    expect(out.actions_needed).toEqual([]);
    expect(out.drift_summary?.resources).toMatchObject({
      ecs_cluster: 'in_sync',
      log_group: 'in_sync',
      task_definition: 'in_sync',
      pull_secret: 'in_sync',
      gce_service_account: 'skipped',
      gce_instance_template: 'skipped',
      cloud_run_job: 'skipped',
    });
    for (const step of [
      'drift_detect_init',
      'drift_detect_ecs_cluster',
      'drift_build_plan',
      'drift_finalize',
    ]) {
      expect(out[step], step).toBeTruthy();
    }
    expect(out.workflow_run_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.runner_execution_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.backend_type).toBe('aws_ecs');
    expect(out.cloud_connection_uuid).toBe(conn.cloud_connection_uuid);
    const plan = await getPlan(bed.db, org, out.plan_uuid ?? '');
    expect(plan?.plan_status).toBe('clean');
    await eventually(async () => expect(await bed.workerCalls(conn.region)).toBeGreaterThan(0));
    expect(await bed.workerMutations(conn.region)).toEqual([]);
  });

  it('clean GCE and Cloud Run environments give clean plans; AWS detectors report skipped there', async () => {
    const conn = await bed.connection(org, 'gcp');
    const gce = gceEnvironment();
    const run = cloudRunEnvironment();
    await provisionGcp(bed.gcpClient, conn, gce);
    await provisionGcp(bed.gcpClient, conn, run);
    const [a, b] = await Promise.all([
      detect(await bed.group(org, conn, gce)),
      detect(await bed.group(org, conn, run)),
    ]);
    expect(a.plan_status).toBe('clean');
    expect(a.drift_summary?.resources).toMatchObject({
      ecs_cluster: 'skipped',
      gce_service_account: 'in_sync',
      gce_instance_template: 'in_sync',
      cloud_run_job: 'skipped',
    });
    expect(b.plan_status).toBe('clean');
    expect(b.drift_summary?.resources).toMatchObject({
      gce_service_account: 'in_sync',
      cloud_run_job: 'in_sync',
    });
    expect(b.drift_detect_gce_instance_template).toMatchObject({ status: 'skipped' });
  });

  // Each of the seven resources missing or drifted in turn, changed out of band with the real APIs.
  const awsCases: {
    name: string;
    resource: string;
    action: string | null;
    status: string;
    breakIt: (env: ReturnType<typeof awsEnvironment>, region: string) => Promise<void>;
  }[] = [
    {
      name: 'ECS cluster deleted',
      resource: 'ecs_cluster',
      action: 'create',
      status: 'missing',
      breakIt: async (env, region) => {
        await bed.awsClients(region).ecs.send(new DeleteClusterCommand({ cluster: env.ecs_cluster.name }));
      },
    },
    {
      name: 'ECS cluster Container Insights turned off',
      resource: 'ecs_cluster',
      action: 'update',
      status: 'drifted',
      breakIt: async (env, region) => {
        const { UpdateClusterCommand } = await import('@aws-sdk/client-ecs');
        await bed.awsClients(region).ecs.send(
          new UpdateClusterCommand({
            cluster: env.ecs_cluster.name,
            settings: [{ name: 'containerInsights', value: 'disabled' }],
          }),
        );
      },
    },
    {
      name: 'log group deleted',
      resource: 'log_group',
      action: 'create',
      status: 'missing',
      breakIt: async (env, region) => {
        await bed
          .awsClients(region)
          .logs.send(new DeleteLogGroupCommand({ logGroupName: env.log_group.name }));
      },
    },
    {
      name: 'log group retention changed',
      resource: 'log_group',
      action: 'update',
      status: 'drifted',
      breakIt: async (env, region) => {
        await bed
          .awsClients(region)
          .logs.send(new PutRetentionPolicyCommand({ logGroupName: env.log_group.name, retentionInDays: 3 }));
      },
    },
    {
      name: 'task definition re-registered with another image',
      resource: 'task_definition',
      action: 'update',
      status: 'drifted',
      breakIt: async (env, region) => {
        await bed.awsClients(region).ecs.send(
          new RegisterTaskDefinitionCommand({
            family: env.task_definition.family,
            cpu: env.task_definition.cpu,
            memory: env.task_definition.memory,
            containerDefinitions: [{ name: 'runner', image: 'evil.example/miner:latest', essential: true }],
          }),
        );
      },
    },
    {
      name: 'pull secret scheduled for deletion',
      resource: 'pull_secret',
      action: 'restore',
      status: 'drifted',
      breakIt: async (env, region) => {
        await bed
          .awsClients(region)
          .secrets.send(new DeleteSecretCommand({ SecretId: env.pull_secret.name, RecoveryWindowInDays: 7 }));
      },
    },
    {
      name: 'pull secret gone for good (needs a person: blocked)',
      resource: 'pull_secret',
      action: null,
      status: 'blocked',
      breakIt: async (env, region) => {
        await bed
          .awsClients(region)
          .secrets.send(
            new DeleteSecretCommand({ SecretId: env.pull_secret.name, ForceDeleteWithoutRecovery: true }),
          );
      },
    },
  ];

  it.each(awsCases)('AWS: $name → $status, action $action', async ({ resource, action, status, breakIt }) => {
    const conn = await bed.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    await breakIt(env, conn.region);
    const out = await detect(await bed.group(org, conn, env));
    expect(out.status).toBe('completed');
    expect(out.drift_summary?.resources[resource as 'ecs_cluster']).toBe(status);
    const others = Object.entries(out.drift_summary?.resources ?? {}).filter(([r]) => r !== resource);
    expect(
      others.every(([, s]) => s === 'in_sync' || s === 'skipped'),
      JSON.stringify(others),
    ).toBe(true);
    if (action) {
      expect(out.plan_status).toBe('drifted');
      expect(out.actions_needed).toEqual([
        expect.objectContaining({ resource, action, step: `drift_detect_${resource}` }),
      ]);
      expect(out.outcome).toBe('drift_found');
    } else {
      expect(out.plan_status).toBe('blocked');
      expect(out.actions_needed).toEqual([]);
      expect(out.blocked_resources?.[0]?.resource).toBe(resource);
      expect(out.blocked_resources?.[0]?.reason).toContain('does not exist');
    }
  });

  const gcpCases: {
    name: string;
    resource: string;
    action: string;
    backend: 'gce' | 'cloud_run';
    breakIt: (env: RunnerEnvironment, project: string, region: string) => Promise<void>;
  }[] = [
    {
      name: 'service account deleted',
      resource: 'gce_service_account',
      action: 'create',
      backend: 'gce',
      breakIt: async (env, project) => {
        if (env.backend_type !== 'gce') return;
        await bed.gcpClient.deleteServiceAccount(
          project,
          bed.gcpClient.serviceAccountEmail(project, env.service_account.account_id),
        );
        // The template still names the account; only the account is missing.
      },
    },
    {
      name: 'service account disabled',
      resource: 'gce_service_account',
      action: 'enable',
      backend: 'cloud_run',
      breakIt: async (env, project) => {
        if (env.backend_type !== 'cloud_run') return;
        const email = bed.gcpClient.serviceAccountEmail(project, env.service_account.account_id);
        const res = await fetch(`${bed.gcp.url}/v1/projects/${project}/serviceAccounts/${email}:disable`, {
          method: 'POST',
          headers: { authorization: `Bearer ${bed.gcpToken}` },
        });
        expect(res.status).toBe(200);
      },
    },
    {
      name: 'instance template replaced with another machine type',
      resource: 'gce_instance_template',
      action: 'replace',
      backend: 'gce',
      breakIt: async (env, project) => {
        if (env.backend_type !== 'gce') return;
        const t = await bed.gcpClient.getInstanceTemplate(project, env.instance_template.name);
        await bed.gcpClient.deleteInstanceTemplate(project, env.instance_template.name);
        await bed.gcpClient.insertInstanceTemplate(project, {
          ...t!,
          properties: { ...t!.properties, machineType: 'e2-micro' },
        });
      },
    },
    {
      name: 'instance template deleted',
      resource: 'gce_instance_template',
      action: 'create',
      backend: 'gce',
      breakIt: async (env, project) => {
        if (env.backend_type !== 'gce') return;
        await bed.gcpClient.deleteInstanceTemplate(project, env.instance_template.name);
      },
    },
    {
      name: 'Cloud Run job image changed',
      resource: 'cloud_run_job',
      action: 'update',
      backend: 'cloud_run',
      breakIt: async (env, project, region) => {
        if (env.backend_type !== 'cloud_run') return;
        const job = await bed.gcpClient.getJob(project, region, env.cloud_run_job.name);
        await bed.gcpClient.patchJob(project, region, env.cloud_run_job.name, {
          template: {
            template: { ...job!.template.template, containers: [{ image: 'evil.example/miner:latest' }] },
          },
        });
      },
    },
    {
      name: 'Cloud Run job deleted',
      resource: 'cloud_run_job',
      action: 'create',
      backend: 'cloud_run',
      breakIt: async (env, project, region) => {
        if (env.backend_type !== 'cloud_run') return;
        await bed.gcpClient.deleteJob(project, region, env.cloud_run_job.name);
      },
    },
  ];

  it.each(gcpCases)('GCP: $name → action $action', async ({ resource, action, backend, breakIt }) => {
    const conn = await bed.connection(org, 'gcp');
    const env = backend === 'gce' ? gceEnvironment() : cloudRunEnvironment();
    await provisionGcp(bed.gcpClient, conn, env);
    await breakIt(env, conn.project_id ?? '', conn.region);
    const out = await detect(await bed.group(org, conn, env));
    expect(out.plan_status).toBe('drifted');
    expect(out.actions_needed).toEqual([expect.objectContaining({ resource, action })]);
  });

  /** Breaks several AWS resources at once: cluster gone, retention changed, image changed, secret being deleted. */
  const breakAws = async (env: ReturnType<typeof awsEnvironment>, region: string) => {
    const c = bed.awsClients(region);
    await c.ecs.send(new DeleteClusterCommand({ cluster: env.ecs_cluster.name }));
    await c.logs.send(
      new PutRetentionPolicyCommand({ logGroupName: env.log_group.name, retentionInDays: 1 }),
    );
    await c.ecs.send(
      new RegisterTaskDefinitionCommand({
        family: env.task_definition.family,
        cpu: env.task_definition.cpu,
        memory: env.task_definition.memory,
        containerDefinitions: [{ name: 'runner', image: 'evil.example/miner:latest', essential: true }],
      }),
    );
    await c.secrets.send(
      new DeleteSecretCommand({ SecretId: env.pull_secret.name, RecoveryWindowInDays: 7 }),
    );
  };

  it('auto_apply defaults to false: drift is planned and nothing is mutated (moto recorder, Google request log)', async () => {
    const aws = await bed.connection(org, 'aws', 'ap-southeast-2'); // a region of this test's own
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(aws.region), env);
    await breakAws(env, aws.region);
    const gcp = await bed.connection(org, 'gcp');
    const gce = gceEnvironment();
    await provisionGcp(bed.gcpClient, gcp, gce);
    await bed.gcpClient.deleteInstanceTemplate(gcp.project_id ?? '', gce.instance_template.name);

    const gcpBefore = bed.gcp.requests.length;
    const [a, g] = await Promise.all([
      detect(await bed.group(org, aws, env)),
      detect(await bed.group(org, gcp, gce)),
    ]);
    expect(a.auto_apply).toBe(false);
    expect(a.plan_status).toBe('drifted');
    expect(a.actions_needed?.map((x) => `${x.resource}:${x.action}`).sort()).toEqual([
      'ecs_cluster:create',
      'log_group:update',
      'pull_secret:restore',
      'task_definition:update',
    ]);
    expect(a.repair_workflow_uuid).toBeNull();
    expect(g.plan_status).toBe('drifted');
    expect(g.repair_workflow_uuid).toBeNull();
    await eventually(async () => expect(await bed.workerCalls(aws.region)).toBeGreaterThan(0));
    expect(await bed.workerMutations(aws.region)).toEqual([]);
    // The Google APIs were only read (the token service's exchanges are the connection's sign-in).
    const gcpCalls = bed.gcp.requests.slice(gcpBefore).filter((r) => r.path !== '/v1/token');
    expect(gcpCalls.length).toBeGreaterThan(0);
    expect(gcpCalls.filter((r) => r.method !== 'GET')).toEqual([]);
  });

  const repairOf = async (out: RunnerDagState): Promise<RunnerDagState> => {
    expect(out.repair_workflow_id).toBeTruthy();
    const handle = h.client.workflow.getHandle(out.repair_workflow_id ?? '', out.repair_workflow_uuid);
    try {
      return (await handle.result()) as RunnerDagState;
    } catch (err) {
      const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
      if (cause instanceof ApplicationFailure && cause.details?.[0])
        return cause.details[0] as RunnerDagState;
      throw err;
    }
  };

  it('auto_apply with drift chains the repair (its run id returned); afterwards a fresh detect is clean', async () => {
    const conn = await bed.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    await breakAws(env, conn.region);
    const group = await bed.group(org, conn, env);
    const out = await detect(group, { auto_apply: true, trace_ref: 'ticket-42' });
    expect(out.plan_status).toBe('drifted');
    expect(out.outcome).toBe('repair_started');
    expect(out.repair_workflow_uuid).toMatch(/^[0-9a-f-]{36}$/);
    const repair = await repairOf(out);
    expect(repair.status).toBe('completed');
    expect(repair.outcome).toBe('repaired');
    expect(repair.workflow_run_uuid).toBe(out.repair_workflow_uuid);
    expect(repair.plan_uuid).toBe(out.plan_uuid);
    expect(repair.trace_ref).toBe('ticket-42');
    expect(repair.drift_repair_ecs_cluster).toMatchObject({ status: 'repaired', created: true });
    expect(repair.drift_repair_pull_secret).toMatchObject({ status: 'repaired' });
    const cluster = await bed
      .awsClients(conn.region)
      .ecs.send(new DescribeClustersCommand({ clusters: [env.ecs_cluster.name] }));
    expect(cluster.clusters?.[0]?.status).toBe('ACTIVE');
    expect((await getPlan(bed.db, org, out.plan_uuid ?? ''))?.repair_status).toBe('repaired');

    const again = await detect(group);
    expect(again.plan_status).toBe('clean');
  });

  it('auto_apply repairs a Cloud Run environment (service account and job) through the Google APIs', async () => {
    const conn = await bed.connection(org, 'gcp');
    const env = cloudRunEnvironment();
    const group = await bed.group(org, conn, env); // nothing provisioned: all missing
    const out = await detect(group, { auto_apply: true });
    expect(out.actions_needed?.map((a) => `${a.resource}:${a.action}`).sort()).toEqual([
      'cloud_run_job:create',
      'gce_service_account:create',
    ]);
    const repair = await repairOf(out);
    expect(repair.status).toBe('completed');
    expect((await detect(group)).plan_status).toBe('clean');
  });

  it('a repair step failing compensates what the repair created, in reverse layer order, and records it', async () => {
    const conn = await bed.connection(org, 'gcp');
    const env = gceEnvironment();
    // GCE has no such machine type: the template insert is refused (400) after the account exists.
    env.instance_template.machine_type = 'e2-imaginary';
    const group = await bed.group(org, conn, env);
    const out = await detect(group, { auto_apply: true });
    expect(out.actions_needed?.map((a) => a.resource).sort()).toEqual([
      'gce_instance_template',
      'gce_service_account',
    ]);
    const repair = await repairOf(out);
    expect(repair.status).toBe('compensated');
    expect(repair.failed_step).toBe('drift_repair_gce_instance_template');
    expect(repair.failed_layer).toBe('workload');
    expect(repair.error_type).toBe('CloudRequestRejectedError');
    expect(repair.failure_reason).toContain("Machine type with name 'e2-imaginary' does not exist");
    expect(repair.compensation_trigger).toMatchObject({
      step: 'drift_repair_gce_instance_template',
      layer: 'workload',
    });
    expect(repair.drift_repair_gce_service_account).toMatchObject({ created: true });
    expect(repair.drift_repair_gce_service_account_compensation).toMatchObject({ status: 'deleted' });
    expect(repair.comp_queue).toEqual([]);
    expect(repair.comp_current_layer).toBeNull();
    expect(repair.comp_retry_count).toEqual({});
    const email = bed.gcpClient.serviceAccountEmail(conn.project_id ?? '', env.service_account.account_id);
    expect(await bed.gcpClient.getServiceAccount(conn.project_id ?? '', email)).toBeNull();
    expect((await getPlan(bed.db, org, out.plan_uuid ?? ''))?.repair_status).toBe('compensated');
  });

  it('a detector failing (AWS emulator down) fails the run with the step and layer named', async () => {
    const { awsClientFactory } = await import('../../activities/runners/clouds');
    const { freePort } = await import('../../scripts/embedded/ports');
    const port = await freePort();
    const down = await temporalHarness(
      'runner-dag-down',
      testActivities({
        runners: {
          ...bed.deps,
          clients: (_org, connection) => {
            const aws = awsClientFactory({
              endpoint: `http://127.0.0.1:${port}`,
              credentials: { accessKeyId: 'AKIAKUMOSSTEST000001', secretAccessKey: bed.awsSecret },
            });
            return Promise.resolve({ aws: aws(connection.region) });
          },
        },
      }),
    );
    try {
      const conn = await bed.connection(org, 'aws');
      const group = await bed.group(org, conn, awsEnvironment());
      const err = await down.client.workflow
        .execute('runner.environment-drift-detect', {
          taskQueue: down.taskQueue,
          workflowId: randomUUID(),
          args: [{ runner_group_uuid: group.runner_group_uuid, organization_uuid: org }],
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const state = ((err as WorkflowFailedError).cause as ApplicationFailure).details?.[0] as RunnerDagState;
      expect(state.status).toBe('failed');
      expect(state.failed_step).toBe('drift_detect_ecs_cluster');
      expect(state.failed_layer).toBe('detect');
      expect(state.failed_at_state?.layer_index).toBe(1);
      expect(state.failed_at_state?.completed_steps).toContain('drift_detect_init');
      expect(state.error).toMatch(/unreachable|ECONNREFUSED/);
      expect(state.failure_reason).toMatch(/^Step drift_detect_ecs_cluster in layer detect failed/);
      expect(state.failed_at).toBeTruthy();
      expect(state.drift_detect_gce_service_account).toMatchObject({ status: 'skipped' });
      expect(state.compensation_trigger).toBeNull();
    } finally {
      await down.close();
    }
  });

  it("another organization's runner group is not found: the run fails at init and touches no cloud", async () => {
    const other = await bed.organization();
    const conn = await bed.connection(other, 'aws', 'sa-east-1'); // a region of this test's own
    const group = await bed.group(other, conn, awsEnvironment());
    const err = await detect(group).then(
      () => null,
      (e: unknown) => e,
    );
    const state = ((err as WorkflowFailedError).cause as ApplicationFailure).details?.[0] as RunnerDagState;
    expect(state.failed_step).toBe('drift_detect_init');
    expect(state.error_type).toBe('NotFoundError');
    expect(state.error).toContain(`Runner group ${group.runner_group_uuid} not found`);
    expect(await bed.workerCalls(conn.region)).toBe(0);
  });

  it('starts from the Temporal CLI: temporal workflow start --type runner.environment-drift-detect', async () => {
    const { execFileSync } = await import('node:child_process');
    const { toolPath } = await import('../../shared/infra/tools.mjs');
    const conn = await bed.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    const group = await bed.group(org, conn, env);
    const workflowId = `cli-${randomUUID()}`;
    const input = JSON.stringify({ runner_group_uuid: group.runner_group_uuid, organization_uuid: org });
    execFileSync(
      toolPath('temporal'),
      [
        'workflow',
        'start',
        '--address',
        stack().temporalAddress,
        '--type',
        'runner.environment-drift-detect',
        '--task-queue',
        h.taskQueue,
        '--workflow-id',
        workflowId,
        '--input',
        input,
      ],
      { encoding: 'utf8' },
    );
    const out = (await h.client.workflow.getHandle(workflowId).result()) as RunnerDagState;
    expect(out.workflow_uuid).toBe(workflowId);
    expect(out.plan_status).toBe('clean');
  });
});
