// The runner environment drift DAG on the real stack: Temporal dev server, moto_server (AWS) and
// the loopback Google APIs, the metadata store.
import { DeleteLogGroupCommand, DescribeLogGroupsCommand, PutRetentionPolicyCommand } from '@aws-sdk/client-cloudwatch-logs';
import { DeleteClusterCommand, DescribeClustersCommand, RegisterTaskDefinitionCommand } from '@aws-sdk/client-ecs';
import { DeleteSecretCommand } from '@aws-sdk/client-secrets-manager';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { getPlan } from '../../shared/db/runners';
import type { RunnerDagState, RunnerEnvironment } from '../../shared/runner-contracts';
import {
  awsEnvironment,
  cloudRunEnvironment,
  gceEnvironment,
  mutatingActions,
  provisionAws,
  provisionGcp,
  startRunnerBed,
  type RunnerBed,
} from '../support/runner-bed';
import { temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

describe('runner.environment-drift-detect', () => {
  let bed: RunnerBed;
  let h: TemporalHarness;
  let org: string;

  beforeAll(async () => {
    bed = await startRunnerBed();
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
    const conn = await bed.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    const group = await bed.group(org, conn, env);
    const before = (await bed.aws.recordedActions()).length;
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
    for (const step of ['drift_detect_init', 'drift_detect_ecs_cluster', 'drift_build_plan', 'drift_finalize']) {
      expect(out[step], step).toBeTruthy();
    }
    expect(out.workflow_run_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.runner_execution_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.backend_type).toBe('aws_ecs');
    expect(out.cloud_connection_uuid).toBe(conn.cloud_connection_uuid);
    const plan = await getPlan(bed.db, org, out.plan_uuid ?? '');
    expect(plan?.plan_status).toBe('clean');
    expect(mutatingActions((await bed.aws.recordedActions()).slice(before))).toEqual([]);
  });
});
