// The runner DAG over the real HTTP API on a real socket: the registry routes, POST
// /api/workflows/start and GET /api/workflows/{id}, organization injection, tenant isolation,
// roles, bad input (4xx, nothing started), retries.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { roleTokens, startTestApi, waitForWorkflow, type TestApi } from '../support/api';
import {
  awsEnvironment,
  gceEnvironment,
  provisionAws,
  startRunnerBed,
  type RunnerBed,
} from '../support/runner-bed';
import { stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';
import { findUserByToken } from '../../shared/infra/db/users';
import { SEED_OUTPUT_FIELDS } from '../../shared/runner-contracts';

type Json = Record<string, unknown>;

describe('runner workflows API', () => {
  let bed: RunnerBed;
  let h: TemporalHarness;
  let api: TestApi;
  let tokens: Record<string, string>;
  let other: Record<string, string>;

  beforeAll(async () => {
    bed = await startRunnerBed(stack().databaseUrl);
    h = await temporalHarness('runner-api', testActivities({ runners: bed.deps }));
    tokens = await roleTokens(bed.db, 'runner-api');
    other = await roleTokens(bed.db, 'runner-api-other');
    api = await startTestApi(h, bed.db);
  });
  afterAll(async () => {
    api?.close();
    await h?.close();
    await bed?.close();
  });

  const call = (method: string, path: string, token?: string, body?: unknown) =>
    api.call(method, path, token, body);

  /** Registers an AWS connection and a provisioned group through the API, as `token`'s organization. */
  const registerGroup = async (token: string, provision = true) => {
    // An admin of the same organization stores the connection's credentials.
    const admin = token === other.devops ? other.admin : tokens.admin;
    const conn = await call('POST', '/api/v1/cloud-connections', admin, {
      name: `aws-${randomUUID().slice(0, 8)}`,
      provider: 'aws',
      region: 'eu-west-1',
      credentials: bed.connectionCredentials('aws'),
    });
    expect(conn.status).toBe(201);
    const env = awsEnvironment();
    if (provision) await provisionAws(bed.awsClients('eu-west-1'), env);
    const group = await call('POST', '/api/v1/runner-groups', token, {
      name: `group-${randomUUID().slice(0, 8)}`,
      cloud_connection_uuid: conn.body.cloud_connection_uuid,
      environment: env,
    });
    expect(group.status).toBe(201);
    expect(group.location).toBe(`/api/v1/runner-groups/${String(group.body.runner_group_uuid)}`);
    return { group: group.body, connection: conn.body, env };
  };

  const waitFor = (id: string, token: string): Promise<Json> => waitForWorkflow(api, token, id);

  it('POST /api/workflows/start answers 202 with the run ids; GET gives status and every output field', async () => {
    const { group, connection } = await registerGroup(tokens.devops ?? '');
    const r = await call('POST', '/api/workflows/start', tokens.developer, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: group.runner_group_uuid, trace_ref: 'req-7' },
    });
    expect(r.status).toBe(202);
    expect(r.body.workflow_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.body.workflow_run_uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.location).toBe(`/api/workflows/${String(r.body.workflow_uuid)}`);
    const done = await waitFor(String(r.body.workflow_uuid), tokens.developer ?? '');
    expect(done.status).toBe('COMPLETED');
    const out = done.output as Json;
    const developer = await findUserByToken(bed.db, tokens.developer ?? '');
    expect(out).toMatchObject({
      runner_group_uuid: group.runner_group_uuid,
      organization_uuid: developer?.organization_uuid,
      actor_uuid: developer?.user_uuid,
      workflow_uuid: r.body.workflow_uuid,
      workflow_run_uuid: r.body.workflow_run_uuid,
      status: 'completed',
      outcome: 'clean',
      plan_status: 'clean',
      auto_apply: false,
      trace_ref: 'req-7',
      backend_type: 'aws_ecs',
      cloud_connection_uuid: connection.cloud_connection_uuid,
      retry_count: 0,
      failed_step: null,
      compensation_trigger: null,
    });
    // Every field of seed 002's output schema is present (null or a value).
    for (const field of SEED_OUTPUT_FIELDS) expect(out, field).toHaveProperty(field);
    expect(Object.keys(out)).toEqual(expect.arrayContaining([...SEED_OUTPUT_FIELDS]));
    expect(out.failed_at).toBeNull();
    expect(out.repair_workflow_uuid).toBeNull();
    const plan = await call('GET', `/api/v1/runner-plans/${String(out.plan_uuid)}`, tokens.developer);
    expect(plan.status).toBe(200);
    expect(plan.body.plan_status).toBe('clean');
    const execs = await call(
      'GET',
      `/api/v1/runner-groups/${String(group.runner_group_uuid)}/executions`,
      tokens.developer,
    );
    expect((execs.body.executions as Json[])[0]).toMatchObject({
      workflow_uuid: r.body.workflow_uuid,
      status: 'completed',
    });
  });

  it("organization_uuid comes from the caller: naming another gets 403, another tenant's group or run 404", async () => {
    const mine = await registerGroup(tokens.devops ?? '', false);
    const theirs = await registerGroup(other.devops ?? '', false);
    const otherOrg = (await findUserByToken(bed.db, other.devops ?? ''))?.organization_uuid;
    const before = await countRuns();
    const named = await call('POST', '/api/workflows/start', tokens.devops, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: mine.group.runner_group_uuid, organization_uuid: otherOrg },
    });
    expect(named.status).toBe(403);
    expect((named.body.error as Json).field).toBe('initial_data.organization_uuid');
    const foreign = await call('POST', '/api/workflows/start', tokens.devops, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: theirs.group.runner_group_uuid },
    });
    expect(foreign.status).toBe(404);
    expect(await countRuns()).toBe(before);
    expect(
      (await call('GET', `/api/v1/runner-groups/${String(theirs.group.runner_group_uuid)}`, tokens.devops))
        .status,
    ).toBe(404);

    const theirRun = await call('POST', '/api/workflows/start', other.developer, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: theirs.group.runner_group_uuid },
    });
    expect(theirRun.status).toBe(202);
    expect(
      (await call('GET', `/api/workflows/${String(theirRun.body.workflow_uuid)}`, tokens.admin)).status,
    ).toBe(404);
    expect(
      (await call('GET', `/api/workflows/${String(theirRun.body.workflow_run_uuid)}`, tokens.admin)).status,
    ).toBe(404);
    expect(
      (await call('GET', `/api/workflows/${String(theirRun.body.workflow_uuid)}`, other.developer)).status,
    ).toBe(200);
  });

  const countRuns = async (): Promise<number> => {
    let n = 0;
    for await (const wf of h.client.workflow.list({ query: `TaskQueue = '${h.taskQueue}'` })) if (wf) n++;
    return n;
  };

  it('unknown workflow types, invalid or unknown fields and malformed bodies are 4xx and start nothing', async () => {
    const { group } = await registerGroup(tokens.devops ?? '', false);
    const before = await countRuns();
    const cases: [unknown, number, string][] = [
      [{ workflow_type: 'runner.environment-drift-nuke', initial_data: {} }, 400, 'workflow_type'],
      [{ initial_data: {} }, 400, 'workflow_type'],
      [
        { workflow_type: 'runner.environment-drift-detect', initial_data: {} },
        400,
        'initial_data.runner_group_uuid',
      ],
      [
        { workflow_type: 'runner.environment-drift-detect', initial_data: { runner_group_uuid: 'nope' } },
        400,
        'initial_data.runner_group_uuid',
      ],
      [
        {
          workflow_type: 'runner.environment-drift-detect',
          initial_data: { runner_group_uuid: group.runner_group_uuid, auto_apply: 'false' },
        },
        400,
        'initial_data.auto_apply',
      ],
      [
        {
          workflow_type: 'runner.environment-drift-detect',
          initial_data: { runner_group_uuid: group.runner_group_uuid, retry_count: 5 },
        },
        400,
        'initial_data.retry_count',
      ],
      [
        {
          workflow_type: 'runner.environment-drift-detect',
          initial_data: { runner_group_uuid: randomUUID() },
        },
        404,
        'initial_data.runner_group_uuid',
      ],
      [
        {
          workflow_type: 'runner.environment-drift-repair',
          initial_data: { runner_group_uuid: group.runner_group_uuid, plan_uuid: randomUUID() },
        },
        404,
        'initial_data.plan_uuid',
      ],
      [{ workflow_type: 'runner.environment-drift-detect', initial_data: {}, extra: 1 }, 400, 'extra'],
      ['{"workflow_type": ', 400, ''],
    ];
    for (const [body, status, field] of cases) {
      const r = await call('POST', '/api/workflows/start', tokens.devops, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect((r.body.error as Json).message, JSON.stringify(body)).toBeTruthy();
      if (field) expect((r.body.error as Json).field, JSON.stringify(body)).toBe(field);
    }
    expect((await call('GET', '/api/workflows/does-not-exist', tokens.devops)).status).toBe(404);
    expect(await countRuns()).toBe(before);
  });

  it('roles: detection is open to developers; auto_apply and repair need devops', async () => {
    const { group } = await registerGroup(tokens.devops ?? '', false);
    const auto = await call('POST', '/api/workflows/start', tokens.developer, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: group.runner_group_uuid, auto_apply: true },
    });
    expect(auto.status).toBe(403);
    expect((auto.body.error as Json).message).toBe('Requires the devops operation role.');
    expect((await call('POST', '/api/v1/runner-groups', tokens.developer, {})).status).toBe(403);
    expect((await call('POST', '/api/workflows/start', undefined, {})).status).toBe(401);
  });

  it('the registry rejects bad environments and a connection of the wrong cloud with a 400', async () => {
    const conn = await call('POST', '/api/v1/cloud-connections', tokens.devops, {
      name: `g-${randomUUID().slice(0, 6)}`,
      provider: 'gcp',
      region: 'europe-west1',
    });
    expect(conn.status).toBe(400);
    expect((conn.body.error as Json).field).toBe('project_id');
    const gcp = await call('POST', '/api/v1/cloud-connections', tokens.devops, {
      name: `g-${randomUUID().slice(0, 6)}`,
      provider: 'gcp',
      region: 'europe-west1',
      project_id: 'kumoss-demo-1',
    });
    expect(gcp.status).toBe(201);
    const wrongCloud = await call('POST', '/api/v1/runner-groups', tokens.devops, {
      name: `x-${randomUUID().slice(0, 6)}`,
      cloud_connection_uuid: gcp.body.cloud_connection_uuid,
      environment: awsEnvironment(),
    });
    expect(wrongCloud.status).toBe(400);
    expect((wrongCloud.body.error as Json).message).toContain('runs on aws');
    const badEnv = await call('POST', '/api/v1/runner-groups', tokens.devops, {
      name: `x-${randomUUID().slice(0, 6)}`,
      environment: { backend_type: 'gce', service_account: { account_id: 'UPPER' } },
    });
    expect(badEnv.status).toBe(400);
    expect((await call('GET', '/api/v1/runner-groups', tokens.developer)).status).toBe(200);
  });

  it('a failed repair, fixed and retried through the API, carries retry_count and retried_from', async () => {
    const conn = await call('POST', '/api/v1/cloud-connections', tokens.admin, {
      name: `g-${randomUUID().slice(0, 6)}`,
      provider: 'gcp',
      region: 'europe-west1',
      project_id: `kumoss-${randomUUID().slice(0, 8)}`,
      credentials: bed.connectionCredentials('gcp'),
    });
    const env = gceEnvironment();
    env.instance_template.machine_type = 'e2-imaginary'; // GCE refuses it
    const spec = {
      name: `gce-${randomUUID().slice(0, 6)}`,
      cloud_connection_uuid: conn.body.cloud_connection_uuid,
      environment: env,
    };
    const group = (await call('POST', '/api/v1/runner-groups', tokens.devops, spec)).body;
    const detect = await call('POST', '/api/workflows/start', tokens.devops, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: group.runner_group_uuid, auto_apply: true },
    });
    const detected = (await waitFor(String(detect.body.workflow_uuid), tokens.devops ?? '')).output as Json;
    expect(detected.outcome).toBe('repair_started');
    // repair_workflow_uuid is a run id: GET takes it too.
    const failed = await waitFor(String(detected.repair_workflow_uuid), tokens.devops ?? '');
    expect(failed.status).toBe('FAILED');
    expect(failed.workflow_uuid).toBe(detected.repair_workflow_id);
    expect(failed.output).toMatchObject({
      status: 'compensated',
      failed_step: 'drift_repair_gce_instance_template',
      failed_layer: 'workload',
      retry_count: 0,
    });

    env.instance_template.machine_type = 'e2-medium';
    const fixed = await call(
      'PUT',
      `/api/v1/runner-groups/${String(group.runner_group_uuid)}`,
      tokens.devops,
      { ...spec, environment: env },
    );
    expect(fixed.status).toBe(200);
    const retry = await call('POST', `/api/workflows/${String(failed.workflow_uuid)}/retry`, tokens.devops);
    expect(retry.status).toBe(202);
    expect(retry.body.retried_from).toBe(failed.workflow_uuid);
    const retried = await waitFor(String(retry.body.workflow_uuid), tokens.devops ?? '');
    expect(retried.status).toBe('COMPLETED');
    expect(retried.output).toMatchObject({
      outcome: 'repaired',
      retry_count: 1,
      retried_from: failed.workflow_uuid,
    });

    const notFailed = await call(
      'POST',
      `/api/workflows/${String(retry.body.workflow_uuid)}/retry`,
      tokens.devops,
    );
    expect(notFailed.status).toBe(409);
    const clean = await call('POST', '/api/workflows/start', tokens.devops, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: group.runner_group_uuid },
    });
    expect(
      ((await waitFor(String(clean.body.workflow_uuid), tokens.devops ?? '')).output as Json).plan_status,
    ).toBe('clean');
  });

  it('runs a runner group on its own Temporal Schedule: set, run now, pause kept across a change, removed', async () => {
    const { group } = await registerGroup(tokens.devops ?? '');
    const id = String(group.runner_group_uuid);
    const path = `/api/v1/runner-groups/${id}/schedule`;
    expect((await call('GET', path, tokens.developer)).status).toBe(404);
    const every30 = { schedule: { interval_minutes: 30, jitter_seconds: 60 } };
    expect((await call('PUT', path, tokens.developer, every30)).status).toBe(403);
    expect((await call('PUT', path, tokens.devops, { schedule: { interval_minutes: 0 } })).status).toBe(400);
    expect((await call('PUT', path, tokens.devops, { ...every30, surprise: 1 })).status).toBe(400);
    expect(
      (await call('PUT', `/api/v1/runner-groups/${randomUUID()}/schedule`, tokens.devops, every30)).status,
    ).toBe(404);
    expect((await call('GET', path, tokens.developer)).status).toBe(404);

    const set = await call('PUT', path, tokens.devops, every30);
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ ...every30, auto_apply: false });
    expect(set.body.schedule_state).toMatchObject({ schedule_id: `runner-schedule:${id}`, paused: false });
    const described = await h.client.schedule.getHandle(`runner-schedule:${id}`).describe();
    expect(described.action).toMatchObject({
      type: 'startWorkflow',
      workflowType: 'runner.environment-drift-detect',
    });
    expect((described.action as { args: Json[] }).args[0]).toMatchObject({
      runner_group_uuid: id,
      auto_apply: false,
    });

    // Run now: the scheduled run is the detection DAG on the group, recorded as its execution; the
    // answer names it.
    const now = await call('POST', `${path}/trigger`, tokens.devops, {});
    expect(now.status).toBe(202);
    const started = String(now.body.workflow_uuid);
    expect(started.startsWith(`runner-detect:${id}-`), started).toBe(true);
    let run: Json | undefined;
    await expect
      .poll(
        async () => {
          const execs = (await call('GET', `/api/v1/runner-groups/${id}/executions`, tokens.developer)).body
            .executions as Json[];
          run = execs.find((e) => e.workflow_uuid === started);
          return run !== undefined;
        },
        { timeout: 60_000, interval: 200 },
      )
      .toBe(true);
    const done = await waitFor(String(run!.workflow_uuid), tokens.developer ?? '');
    expect(done.status).toBe('COMPLETED');
    expect((done.output as Json).auto_apply).toBe(false);

    // Paused with a note, then changed (cron, auto-apply on): still paused, with its note.
    expect((await call('POST', `${path}/pause`, tokens.devops, { note: 'provider upgrade' })).status).toBe(
      200,
    );
    const changed = await call('PUT', path, tokens.devops, {
      schedule: { cron: '0 6 * * 1-5', time_zone: 'Europe/Berlin' },
      auto_apply: true,
    });
    expect(changed.body).toMatchObject({ auto_apply: true, schedule: { cron: '0 6 * * 1-5' } });
    expect(changed.body.schedule_state).toMatchObject({ paused: true, note: 'provider upgrade' });
    expect((await call('POST', `${path}/resume`, tokens.devops, {})).body.schedule_state).toMatchObject({
      paused: false,
    });

    expect((await call('DELETE', path, tokens.devops)).status).toBe(204);
    expect((await call('GET', path, tokens.developer)).status).toBe(404);
    await expect(h.client.schedule.getHandle(`runner-schedule:${id}`).describe()).rejects.toThrow();
  });
});
