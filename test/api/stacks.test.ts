// Stacks on Temporal Schedules and the drift inbox, on the real stack: a stack's schedule exists
// in Temporal under its readable id; a run (the schedule's trigger) plans the stack's root and
// records itself; drift injected between runs opens exactly its items; a whitelisted attribute
// is recorded but never alerts; drift fixed out of band is resolved by the next run; a failing
// run is recorded failed and leaves the inbox as it was; pause and resume change the schedule;
// bad input is a 4xx that creates nothing; a run now answers the run it started, or 409 while one
// runs. Every finding reaches a loopback receiver as a signed
// webhook it checks; a delivery it refuses is retried and logged.
import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { findByCloudIds } from '../../shared/infra/db/stacks';
import { findUserByToken } from '../../shared/infra/db/users';
import { stackScheduleId } from '../../shared/stack-contracts';
import { signatureHeader, verifySignature } from '../../shared/infra/webhooks';
import { startWebhookReceiver, type Delivery, type WebhookReceiver } from '../support/webhook-receiver';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { triggerStackRun, type StackRun as Run } from '../support/stack-runs';
import { roundArtifactKey } from '../../shared/ids';
import {
  APP_CONFIG,
  DRIFT_ADDRESSES,
  MOTD_CONTENT,
  SG_WEB_DEMO,
  type DriftTestBed,
} from '../support/drift-test-bed';
import {
  artifactStore,
  newTestBed,
  promptsWithAwsRules,
  REPLICAS_RULE,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

interface Item {
  drift_item_uuid: string;
  session_id: string | null;
  address: string;
  attribute: string;
  state: string;
  whitelisted: boolean;
  rule_id: string | null;
  runs_seen: number;
}

describe('stacks: scheduled detection and the drift inbox', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let prompts: string;
  // The receiver: checks each delivery's signature with the secret it was given, refuses the first
  // drift.detected (to see the retry), and keeps what it accepted.
  let receiver: WebhookReceiver;
  let receiverUrl: string;
  let secret = '';
  let received: Delivery[] = [];

  beforeAll(async () => {
    // The bed's replica count is tuned by hand: an exception rule whitelists it.
    prompts = promptsWithAwsRules(REPLICAS_RULE);
    h = await temporalHarness('stacks', testActivities({ promptsDir: prompts }));
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'stacks');
    api = await startTestApi(h, db);
    bed = await newTestBed();
    receiver = await startWebhookReceiver({ secret: () => secret, refuseOnce: 'drift.detected' });
    received = receiver.received;
    receiverUrl = receiver.url;
  });
  afterAll(async () => {
    api?.close();
    receiver?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    rmSync(prompts, { recursive: true, force: true });
  });

  const spec = (name: string) => ({
    name,
    repository_url: bed.repoUrl,
    cloud: 'aws',
    scope_id: 'test-scope',
    // Hourly, half an hour from now: a run the test did not trigger never lands inside it (an
    // interval of 60 minutes fires on the hour, and a test crossing it got a run of its own).
    schedule: { cron: `${(new Date().getUTCMinutes() + 30) % 60} * * * *`, jitter_seconds: 30 },
  });

  const runOnce = (id: string): Promise<Run> => triggerStackRun(api, h.client, tokens, id);
  /** The delivery of `event` for `run`, as the receiver took it (waits for it to arrive). */
  const delivery = (event: string, run: string) =>
    receiver.delivery((r) => r.event === event && r.body.id === `${run}:${event}`);
  const items = async (id: string, state?: string) =>
    (
      await api.call(
        'GET',
        `/api/v1/drift-items?stack=${id}${state ? `&state=${state}` : ''}`,
        tokens.developer,
      )
    ).body.items as Item[];

  it('refuses bad input and developers, creating nothing', async () => {
    const count = async () =>
      ((await api.call('GET', '/api/v1/stacks', tokens.developer)).body.stacks as unknown[]).length;
    const n = await count();
    expect((await api.call('POST', '/api/v1/stacks', tokens.developer, spec('dev-stack'))).status).toBe(403);
    for (const bad of [
      { ...spec('bad-url'), repository_url: 'http://example.com/x.git' },
      { ...spec('bad-schedule'), schedule: { interval_minutes: 0 } },
      { ...spec('both'), schedule: { interval_minutes: 5, cron: '0 * * * *' } },
      { ...spec('tz'), schedule: { cron: '0 * * * *', time_zone: 'Mars/Olympus' } },
      { ...spec('extra'), surprise: true },
      { ...spec('bad name!') },
    ]) {
      const r = await api.call('POST', '/api/v1/stacks', tokens.devops, bad);
      expect(r.status, JSON.stringify(bad)).toBe(400);
    }
    expect(await count()).toBe(n);
    expect((await api.call('GET', `/api/v1/drift-items?state=closed`, tokens.developer)).status).toBe(400);
    for (const bad of [
      { url: 'http://hooks.example.com/kumoss', events: ['drift.detected'] },
      { url: 'https://hooks.example.com/kumoss', events: [] },
      { url: 'https://hooks.example.com/kumoss', events: ['drift.everything'] },
    ])
      expect(
        (await api.call('POST', '/api/v1/webhooks', tokens.devops, bad)).status,
        JSON.stringify(bad),
      ).toBe(400);
    expect((await api.call('GET', '/api/v1/webhooks', tokens.developer)).body.webhooks).toEqual([]);
  });

  it('opens the items of injected drift, whitelists the excepted one, resolves fixed drift, survives a failed run', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, spec(`bed-${Date.now()}`));
    expect(created.status).toBe(201);
    const id = created.body.stack_uuid as string;
    expect(created.body.schedule_state).toMatchObject({ schedule_id: `drift-schedule:${id}`, paused: false });
    expect((created.body.schedule_state as { next_runs: string[] }).next_runs.length).toBeGreaterThan(0);
    const described = await h.client.schedule.getHandle(stackScheduleId(id)).describe();
    expect(described.action.type).toBe('startWorkflow');

    const hook = await api.call('POST', '/api/v1/webhooks', tokens.devops, {
      url: receiverUrl,
      events: ['drift.detected', 'drift.resolved', 'detection.failed', 'detection.clean'],
    });
    expect(hook.status).toBe(201);
    secret = hook.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const listed = await api.call('GET', '/api/v1/webhooks', tokens.developer);
    expect(JSON.stringify(listed.body)).not.toContain(secret);

    // Run 1: in sync, nothing opened; the clean heartbeat.
    const first = await runOnce(id);
    expect(first).toMatchObject({ status: 'completed', drift_count: 0, opened: 0 });
    expect(await items(id)).toEqual([]);
    expect((await delivery('detection.clean', first.run_id)).valid).toBe(true);
    // The run indexed its state's cloud ids (an audit event's resources find the stack by them),
    // within its organization only.
    const org = (await findUserByToken(db, tokens.devops))!.organization_uuid;
    expect(await findByCloudIds(db, org, ['sg-web-demo', 'app-config', 'sg-unknown'])).toEqual([
      { stack_uuid: id, cloud_id: 'app-config', address: DRIFT_ADDRESSES.attribute },
      { stack_uuid: id, cloud_id: 'sg-web-demo', address: DRIFT_ADDRESSES.ingress },
    ]);
    expect(await findByCloudIds(db, randomUUID(), ['sg-web-demo'])).toEqual([]);

    // Drift between runs: an ingress rule added (alerts) and the replica count (whitelisted).
    await bed.inject('ingress');
    await bed.inject('attribute');
    const second = await runOnce(id);
    expect(second).toMatchObject({ status: 'completed', drift_count: 2, opened: 1, whitelisted: 1 });
    const open = await items(id, 'open');
    expect(open.map((i) => [i.address, i.attribute, i.whitelisted, i.rule_id]).sort()).toEqual([
      [DRIFT_ADDRESSES.attribute, 'data.replicas', true, 'replicas-tuned-by-oncall'],
      [DRIFT_ADDRESSES.ingress, 'data.ingress', false, null],
    ]);
    // Announced once, signed, with the alerting item only — after the receiver refused it once.
    const detected = await delivery('drift.detected', second.run_id);
    expect(detected.body.data.items).toEqual([
      { address: DRIFT_ADDRESSES.ingress, attribute: 'data.ingress', action: 'update' },
    ]);
    const log = (
      await api.call(
        'GET',
        `/api/v1/webhooks/${hook.body.endpoint_uuid as string}/deliveries`,
        tokens.developer,
      )
    ).body.deliveries as { delivery_id: string; attempts: number; status_code: number }[];
    expect(log.find((d) => d.delivery_id === `${second.run_id}:drift.detected`)).toMatchObject({
      attempts: 2,
      status_code: 200,
    });

    // Still there on the next run: the same items, seen twice, nothing new opened.
    const third = await runOnce(id);
    expect(third).toMatchObject({ opened: 0, resolved: 0 });
    expect((await items(id, 'open')).map((i) => i.runs_seen)).toEqual([2, 2]);

    // A run that fails (the branch is gone) is recorded failed and leaves the inbox alone.
    expect((await api.call('PATCH', `/api/v1/stacks/${id}`, tokens.devops, { branch: 'gone' })).status).toBe(
      200,
    );
    const failed = await runOnce(id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/branch gone not found/);
    expect((await delivery('detection.failed', failed.run_id)).body.data.reason).toMatch(
      /branch gone not found/,
    );
    expect((await items(id, 'open')).length).toBe(2);
    await api.call('PATCH', `/api/v1/stacks/${id}`, tokens.devops, { branch: 'main' });

    // The ingress fixed out of band: resolved by the next run; the whitelisted one stays.
    await bed.api.put(SG_WEB_DEMO.id, SG_WEB_DEMO);
    const fourth = await runOnce(id);
    expect(fourth).toMatchObject({ status: 'completed', resolved: 1, opened: 0 });
    expect((await items(id, 'resolved')).map((i) => i.address)).toEqual([DRIFT_ADDRESSES.ingress]);
    expect((await items(id, 'open')).map((i) => i.address)).toEqual([DRIFT_ADDRESSES.attribute]);
    expect((await delivery('drift.resolved', fourth.run_id)).body.data.items).toEqual([
      { address: DRIFT_ADDRESSES.ingress, attribute: 'data.ingress' },
    ]);
    // Every delivery the receiver took was signed with the endpoint's secret.
    expect(received.every((r) => r.valid)).toBe(true);
    await bed.api.put(APP_CONFIG.id, APP_CONFIG);
  });

  /** The targets the session's first round planned on, once the round has ended. */
  async function sessionTargets(sessionId: string): Promise<{ targets: string[]; status: string }> {
    const detail = await waitForSession(api, tokens.developer, sessionId, 1);
    const round = detail.rounds[0]!;
    const pinned = JSON.parse(
      await artifactStore().getText(roundArtifactKey(sessionId, round.round_id, 'targets.json')),
    ) as { targets: string[] };
    return { targets: pinned.targets, status: round.status };
  }

  it('auto-remediation opens one partial session on new items at a time; chosen items open one on exactly them', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      ...spec(`auto-${Date.now()}`),
      auto_remediate: 'open_session',
    });
    expect(created.status).toBe(201);
    const id = created.body.stack_uuid as string;
    expect(await runOnce(id)).toMatchObject({ status: 'completed', opened: 0, session_id: null });

    // New drift: the run opens its item and a session on exactly that resource (no apply).
    await bed.inject('ingress');
    const drifted = await runOnce(id);
    expect(drifted).toMatchObject({ status: 'completed', opened: 1 });
    const auto = drifted.session_id as string;
    expect(auto).toMatch(/^s-/);
    expect(
      (await api.call('GET', `/api/v1/stacks/${id}`, tokens.developer)).body.remediation_session_id,
    ).toBe(auto);
    expect((await items(id, 'open')).map((i) => [i.address, i.session_id])).toEqual([
      [DRIFT_ADDRESSES.ingress, auto],
    ]);
    const first = await sessionTargets(auto);
    expect(first).toEqual({ targets: [DRIFT_ADDRESSES.ingress], status: 'completed' });
    const detail = await waitForSession(api, tokens.developer, auto, 1);
    expect(detail.status).toBe('ACTIVE');
    expect(detail.rounds[0]).toMatchObject({ kind: 'partial', outcome: 'Succeeded' });

    // More drift while that session is open: the item opens, no second session does.
    await bed.inject('file');
    const more = await runOnce(id);
    expect(more).toMatchObject({ status: 'completed', opened: 1, session_id: null });
    expect(
      (await api.call('GET', `/api/v1/stacks/${id}`, tokens.developer)).body.remediation_session_id,
    ).toBe(auto);
    const motd = (await items(id, 'open')).find((i) => i.address === DRIFT_ADDRESSES.file)!;
    expect(motd.session_id).toBeNull();

    // Chosen items: refused when unknown, resolved, whitelisted, of two stacks, or by a developer.
    const others = await api.call('GET', '/api/v1/drift-items', tokens.developer);
    const all = others.body.items as (Item & { stack_uuid: string })[];
    const whitelisted = all.find((i) => i.whitelisted && i.state === 'open');
    const resolved = all.find((i) => i.state === 'resolved');
    const remediate = (token: string, body: unknown) =>
      api.call('POST', '/api/v1/drift-items/remediate', token, body);
    // Sessions of this test's organization (other test files make theirs at the same time).
    const org = (await findUserByToken(db, tokens.devops))!.organization_uuid;
    const orgSessions = () =>
      db.selectFrom('sessions').select('session_id').where('organization_uuid', '=', org).execute();
    const sessionsBefore = await orgSessions();
    expect((await remediate(tokens.developer, { item_uuids: [motd.drift_item_uuid] })).status).toBe(403);
    expect((await remediate(tokens.devops, { item_uuids: [] })).status).toBe(400);
    expect((await remediate(tokens.devops, { item_uuids: ['not-a-uuid'] })).status).toBe(400);
    const unknown = await remediate(tokens.devops, { item_uuids: ['00000000-0000-4000-8000-000000000000'] });
    expect(unknown.status).toBe(404);
    // The inbox test before left a resolved item and a whitelisted one on its stack.
    expect(resolved && whitelisted).toBeTruthy();
    expect((await remediate(tokens.devops, { item_uuids: [resolved!.drift_item_uuid] })).status).toBe(409);
    expect((await remediate(tokens.devops, { item_uuids: [whitelisted!.drift_item_uuid] })).status).toBe(409);
    const twoStacks = [whitelisted!.drift_item_uuid, motd.drift_item_uuid];
    expect((await remediate(tokens.devops, { item_uuids: twoStacks })).status).toBe(400);
    expect(await orgSessions()).toHaveLength(sessionsBefore.length);

    const chosen = await remediate(tokens.devops, { item_uuids: [motd.drift_item_uuid] });
    expect(chosen.status).toBe(202);
    expect(chosen.body).toMatchObject({ accepted: true, targets: [DRIFT_ADDRESSES.file] });
    const manual = chosen.body.session_id as string;
    expect(manual).not.toBe(auto);
    expect((await sessionTargets(manual)).targets).toEqual([DRIFT_ADDRESSES.file]);
    expect((await items(id, 'open')).find((i) => i.address === DRIFT_ADDRESSES.file)?.session_id).toBe(
      manual,
    );

    await bed.api.put(SG_WEB_DEMO.id, SG_WEB_DEMO);
    writeFileSync(join(bed.filesDir, 'motd.txt'), MOTD_CONTENT);
  });

  it('fires on its own and records each run; paused it starts none, resumed it fires again', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      ...spec(`fires-${Date.now()}`),
      schedule: { interval_minutes: 1, jitter_seconds: 0 },
    });
    const id = created.body.stack_uuid as string;
    const handle = h.client.schedule.getHandle(stackScheduleId(id));
    // The API's shortest interval is a minute; the test's schedule fires every 3 seconds, with
    // the action, policies and attributes the API created (a minute aligned to the clock would
    // cost the suite up to three minutes of waiting).
    await handle.update((prev) => ({ ...prev, spec: { intervals: [{ every: '3s' }] } }));
    const runs = async () =>
      (await api.call('GET', `/api/v1/stacks/${id}/runs`, tokens.developer)).body.runs as Run[];
    const until = async (what: string, ok: (r: Run[]) => boolean) => {
      let last: Run[] = [];
      await expect
        .poll(async () => ok((last = await runs())), {
          timeout: 60_000,
          interval: 200,
          message: `no ${what}`,
        })
        .toBe(true);
      return last;
    };
    const fired = await until('scheduled run', (r) => r.some((x) => x.status === 'completed'));
    const first = fired.find((x) => x.status === 'completed')!;
    expect(first.run_id).toMatch(new RegExp(`^drift-detection:${id}-\\d{4}-\\d{2}-\\d{2}T`));
    const described = await h.client.workflow.getHandle(first.run_id).describe();
    expect(described.searchAttributes.TemporalScheduledById).toEqual([stackScheduleId(id)]);

    expect((await api.call('POST', `/api/v1/stacks/${id}/pause`, tokens.devops, {})).status).toBe(200);
    // Whatever the schedule started before the pause may finish — and a run it started records
    // itself only once its first activity runs, seconds later under load: settled is every action
    // the schedule took recorded and finished. After that, nothing new starts while two of the
    // times it would have fired pass.
    let settled: Run[] = [];
    let taken = 0;
    await expect
      .poll(
        async () => {
          const [r, d] = await Promise.all([runs(), handle.describe()]);
          settled = r;
          taken = d.info.numActionsTaken;
          return (
            d.info.runningActions.length === 0 && r.length === taken && r.every((x) => x.status !== 'running')
          );
        },
        { timeout: 60_000, interval: 200, message: 'no settled run' },
      )
      .toBe(true);
    // (An absence has no event to await: the window is two 3-second fire times and a second.)
    await new Promise((res) => setTimeout(res, 2 * 3_000 + 1_000));
    expect((await runs()).length).toBe(settled.length);
    const paused = await handle.describe();
    expect(paused.state.paused).toBe(true);
    expect(paused.info.numActionsTaken).toBe(taken);

    expect((await api.call('POST', `/api/v1/stacks/${id}/resume`, tokens.devops, {})).status).toBe(200);
    await until('run after resume', (r) => r.length > settled.length);
    expect((await api.call('DELETE', `/api/v1/stacks/${id}`, tokens.devops)).status).toBe(204);
  });

  it('pauses and resumes the schedule with a note; deleting the stack removes its schedule', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      ...spec(`cron-${Date.now()}`),
      schedule: { cron: '30 2 * * *', time_zone: 'Europe/Paris' },
    });
    expect(created.status).toBe(201);
    const id = created.body.stack_uuid as string;
    const paused = await api.call('POST', `/api/v1/stacks/${id}/pause`, tokens.devops, {
      note: 'freeze week',
    });
    expect(paused.body.schedule_state).toMatchObject({ paused: true, note: 'freeze week' });
    expect((await h.client.schedule.getHandle(stackScheduleId(id)).describe()).state.paused).toBe(true);
    const resumed = await api.call('POST', `/api/v1/stacks/${id}/resume`, tokens.devops, {});
    expect((resumed.body.schedule_state as { paused: boolean }).paused).toBe(false);
    expect((await api.call('POST', `/api/v1/stacks/${id}/pause`, tokens.developer, {})).status).toBe(403);
    expect((await api.call('DELETE', `/api/v1/stacks/${id}`, tokens.devops)).status).toBe(204);
    expect((await api.call('GET', `/api/v1/stacks/${id}`, tokens.developer)).status).toBe(404);
    await expect(h.client.schedule.getHandle(stackScheduleId(id)).describe()).rejects.toThrow();
  });

  it('a run now answers the run it started, a new one each time; while one runs it is a 409 naming it', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, spec(`now-${Date.now()}`));
    expect(created.status).toBe(201);
    const id = created.body.stack_uuid as string;
    const trigger = `/api/v1/stacks/${id}/trigger`;
    const schedule = h.client.schedule.getHandle(stackScheduleId(id));
    // The schedule's runs go to a task queue no worker polls: each runs until the test ends it, at
    // once — so the next run now comes in the second the last run started, when the schedule
    // notices the end that fast (it would name the run like the last one and start nothing).
    const idle = `run-now-${randomUUID()}`;
    await schedule.update((prev) => ({ ...prev, action: { ...prev.action, taskQueue: idle } }));
    expect((await api.call('POST', trigger, tokens.developer, {})).status).toBe(403);
    const started: string[] = [];
    for (let i = 0; i < 3; i++) {
      let answer: Awaited<ReturnType<typeof api.call>> | undefined;
      // Until the schedule has seen the last run end, it is still running: 409.
      await expect
        .poll(
          async () => {
            answer = await api.call('POST', trigger, tokens.devops, {});
            return answer.status;
          },
          { timeout: 30_000, interval: 20 },
        )
        .toBe(202);
      const runId = answer!.body.run_id as string;
      expect(runId.startsWith(`drift-detection:${id}-`), runId).toBe(true);
      expect(started).not.toContain(runId);
      expect(answer!.body.stack_uuid).toBe(id);
      const run = h.client.workflow.getHandle(runId);
      expect((await run.describe()).status.name).toBe('RUNNING');
      const busy = await api.call('POST', trigger, tokens.devops, {});
      expect(busy.status).toBe(409);
      expect(busy.body.error).toMatchObject({ code: 'run_in_progress' });
      expect((busy.body.error as { message: string }).message).toContain(runId);
      started.push(runId);
      await run.terminate('the test ends it');
    }
    // Each 202 was a run of its own, and the refusals asked the schedule for nothing.
    const { info } = await schedule.describe();
    expect(info.recentActions.map((a) => a.action.workflow.workflowId)).toEqual(started);
    expect(info.numActionsSkippedOverlap).toBe(0);
    expect((await api.call('DELETE', `/api/v1/stacks/${id}`, tokens.devops)).status).toBe(204);
  });
});

describe('webhook signatures', () => {
  const body = JSON.stringify({ id: 'run:drift.detected', event: 'drift.detected', data: {} });
  it('verify only the body signed with the secret, within the replay window', () => {
    const now = Date.now();
    const header = signatureHeader('whsec_test', body, now);
    expect(verifySignature('whsec_test', header, body, now)).toBe(true);
    expect(verifySignature('whsec_other', header, body, now)).toBe(false);
    expect(verifySignature('whsec_test', header, body.replace('detected', 'resolved'), now)).toBe(false);
    expect(verifySignature('whsec_test', header, body, now + 301_000)).toBe(false);
    const flipped = header.replace(/v1=(.)/, (_, c: string) => `v1=${c === '0' ? '1' : '0'}`);
    expect(verifySignature('whsec_test', flipped, body, now)).toBe(false);
    expect(verifySignature('whsec_test', undefined, body, now)).toBe(false);
  });
});
