// Stack detections wait for a worker in the server's queue, not on the worker: a worker polls the
// detection queue for only as many plans as it runs at once (here one), so three runs due together
// plan one after the other — each plan starts after the one before it ended — and all complete;
// an organization without webhook endpoints costs its runs no delivery activity, and reading the
// stack and recording the inbox are local activities (no activity task). The test bed's
// root without injected drift plans clean: no `show -json` (no plan.json kept), and the cloud-id
// index still written from the state the saved plan carries. A detection plans without the state
// lock: it completes while another process holds the lock, and leaves the lock to its holder.
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { tsToMs } from '@temporalio/common/lib/time';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { createStack } from '../../shared/infra/db/stacks';
import { createUser } from '../../shared/infra/db/users';
import { stackDetectionWorkflowId } from '../../shared/ids';
import type { StackDetectionResult } from '../../shared/stack-contracts';
import type { DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  engineDeps,
  newTestBed,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

describe('the detection queue', () => {
  let h: TemporalHarness;
  let db: Db;
  let bed: DriftTestBed;

  beforeAll(async () => {
    h = await temporalHarness('detection-lane', testActivities(), { detections: 1 });
    db = createDb(stack().databaseUrl);
    await migrate(db);
    bed = await newTestBed();
  });
  afterAll(async () => {
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
  });

  it('a worker takes one plan at a time; the others wait in the queue, and every run completes', async () => {
    const org = `lane-${randomUUID().slice(0, 8)}`;
    const { user } = await createUser(db, { name: `devops-${org}`, role: 'devops', organization: org });
    const stacks = await Promise.all(
      [0, 1, 2].map((i) =>
        createStack(
          db,
          user.organization_uuid,
          {
            name: `lane-${i}`,
            repository_url: bed.repoUrl,
            cloud: 'aws',
            scope_id: 'lane',
            schedule: { interval_minutes: 60 },
          },
          user.user_uuid,
        ),
      ),
    );
    const handles = await Promise.all(
      stacks.map((s) =>
        h.client.workflow.start('stackDetection', {
          taskQueue: h.taskQueue,
          workflowId: `${stackDetectionWorkflowId(s.stack_uuid)}-${Date.now()}`,
          args: [{ stack_uuid: s.stack_uuid }],
        }),
      ),
    );
    const results = (await Promise.all(handles.map((x) => x.result()))) as StackDetectionResult[];
    expect(results.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    // Each run's plan, from its history: when a worker started it and when it ended.
    const spans: { started: number; ended: number }[] = [];
    for (const handle of handles) {
      const events = (await handle.fetchHistory()).events ?? [];
      const scheduled = events.find(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'planStack',
      );
      expect(scheduled?.activityTaskScheduledEventAttributes?.taskQueue?.name).toBe(
        `${h.taskQueue}-detections`,
      );
      const started = events.find(
        (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === Number(scheduled?.eventId),
      );
      const ended = events.find(
        (e) =>
          Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === Number(scheduled?.eventId),
      );
      spans.push({ started: tsToMs(started?.eventTime), ended: tsToMs(ended?.eventTime) });
    }
    spans.sort((a, b) => a.started - b.started);
    // The organization has no webhook endpoint: the clean runs announce nothing, with no activity.
    // Reading the stack and recording the inbox are local activities (markers, no activity task).
    for (const handle of handles) {
      const events = (await handle.fetchHistory()).events ?? [];
      expect(
        events
          .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
          .filter((n): n is string => Boolean(n)),
      ).toEqual(['planStack']);
      expect(
        events
          .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
          .map((e) => {
            const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
            return (JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { activity_type?: string })
              .activity_type;
          }),
      ).toEqual(['beginStackDetection', 'recordStackDetection']);
    }
    for (let i = 1; i < spans.length; i++)
      expect(spans[i]!.started).toBeGreaterThanOrEqual(spans[i - 1]!.ended);

    // Clean plans: the saved plan and the (empty) report kept, no plan.json and no list of what the
    // run saw (nothing to store, nothing to read back); the index written.
    expect(results.map((r) => r.drift_count)).toEqual([0, 0, 0]);
    for (const s of stacks) {
      const kept = (await artifactStore().list(`stacks/${s.stack_uuid}/runs/`)).map((k) =>
        k.split('/').pop(),
      );
      expect(kept.sort()).toEqual(['drift-report.json', 'plan.tfplan']);
      const indexed = await db
        .selectFrom('stack_cloud_ids')
        .select(['address', 'cloud_id'])
        .where('stack_uuid', '=', s.stack_uuid)
        .execute();
      expect(indexed.map((r) => r.address).sort()).toEqual(
        expect.arrayContaining(['rest_object.app_config', 'rest_object.sg_web_demo']),
      );
      expect(indexed.find((r) => r.address === 'rest_object.app_config')?.cloud_id).toBeTruthy();
    }
  });

  it('plans while another process holds the state lock, and leaves the lock to it', async () => {
    const org = `lock-${randomUUID().slice(0, 8)}`;
    const { user } = await createUser(db, { name: `devops-${org}`, role: 'devops', organization: org });
    const s = await createStack(
      db,
      user.organization_uuid,
      {
        name: 'locked',
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'lane',
        schedule: { interval_minutes: 60 },
      },
      user.user_uuid,
    );
    // The engine's own lock on the local state (an fcntl write lock on the state file, as
    // terraform's local backend takes it), held by another process for as long as its input stays
    // open — as an apply of the same state would hold it for its whole run.
    const engine = engineDeps('terraform');
    const statePath = join(dirname(bed.sourceDir), 'state', 'terraform.tfstate');
    const holder = spawn(
      'python3',
      [
        '-c',
        'import fcntl, sys\nf = open(sys.argv[1], "r+")\nfcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nprint("held", flush=True)\nsys.stdin.read()',
        statePath,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const exited = new Promise<number | null>((r) => holder.once('exit', r));
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout.once('data', () => resolve());
        holder.once('exit', (code) => reject(new Error(`the lock holder exited: ${code}`)));
      });
      // A plan that takes the lock is refused while it is held.
      const locking = await promisify(execFile)(
        engine.binary,
        ['plan', '-input=false', '-no-color', '-lock-timeout=0s'],
        { cwd: bed.sourceDir, env: { ...process.env, TF_CLI_CONFIG_FILE: engine.cliConfigFile } },
      ).catch((err: { stderr?: string }) => err);
      expect(locking.stderr).toContain('Error acquiring the state lock');
      const handle = await h.client.workflow.start('stackDetection', {
        taskQueue: h.taskQueue,
        workflowId: `${stackDetectionWorkflowId(s.stack_uuid)}-${Date.now()}`,
        args: [{ stack_uuid: s.stack_uuid }],
      });
      const result = (await handle.result()) as StackDetectionResult;
      expect(result).toMatchObject({ status: 'completed', drift_count: 0 });
      // The holder still holds it: the detection neither waited for nor broke the lock.
      expect(holder.exitCode).toBeNull();
    } finally {
      holder.stdin.end();
    }
    expect(await exited).toBe(0);
  });
});
