// Worker crash: for each phase of a drift round, the worker process is killed with SIGKILL and a
// new one started. Every round completes with the same report as an undisturbed run, its branch
// has no duplicate commits, and no artifact is written twice under different keys.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DriftRoundInput, DriftRoundResult } from '../../shared/contracts';
import { driftReportSchema, type DriftReport } from '../../shared/drift-report';
import { driftRoundWorkflowId, roundArtifactKey, sessionBranch } from '../../shared/ids';
import { driftRound } from '../../workflows';
import type { DriftTestBed } from '../support/drift-test-bed';
import { workerProcess } from '../support/processes';
import {
  artifactStore,
  gitClient,
  newTestBed,
  roundInput,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  untilActivityRunning,
} from '../support/stack';

type Event = temporal.api.history.v1.IHistoryEvent;

const activityType = (events: Event[], scheduledId: unknown): string =>
  events.find((e) => String(e.eventId) === String(scheduledId))?.activityTaskScheduledEventAttributes
    ?.activityType?.name ?? '';

interface Phase {
  name: string;
  /** True when the history shows the moment to kill (phases between activities). */
  now?(events: Event[]): boolean;
  /**
   * Kill while this activity runs on the worker (the server lists it as a started pending
   * activity; history records an activity's start only once it ends). It must then be retried.
   */
  inFlight?: string;
}

const PHASES: Phase[] = [
  {
    name: 'after filtering',
    now: (events) =>
      events.some(
        (e) =>
          e.activityTaskCompletedEventAttributes &&
          activityType(events, e.activityTaskCompletedEventAttributes.scheduledEventId) === 'filterRequest',
      ),
  },
  { name: 'during a plan', inFlight: 'planIteration' },
  { name: 'during a remediation cycle', inFlight: 'generateRemediation' },
  {
    name: 'after the push and before the report',
    now: (events) =>
      events.some(
        (e) => activityType(events, e.eventId) === 'writeReport' && e.activityTaskScheduledEventAttributes,
      ),
  },
];

describe('a drift round survives its worker being killed (SIGKILL)', () => {
  let reference: TemporalHarness;
  const beds: DriftTestBed[] = [];
  const children: ChildProcess[] = [];
  let expected: { report: DriftReport; commits: string[]; artifacts: string[] };

  const partial = (b: DriftTestBed, extra: Partial<DriftRoundInput> = {}) =>
    roundInput(b.repoUrl, {
      mode: 'partial',
      text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
      heartbeat_timeout_seconds: 6,
      ...extra,
    });

  async function bed(): Promise<DriftTestBed> {
    const b = await newTestBed();
    beds.push(b);
    await b.inject('ingress');
    await b.inject('attribute');
    return b;
  }

  /** What a finished round left behind: its report, its branch's commits, its artifact names. */
  async function outcome(input: DriftRoundInput, result: DriftRoundResult) {
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-crash-log-'));
    try {
      const git = gitClient();
      await git.checkout({ url: input.repository_url, dir, branch: sessionBranch(input.session_id) });
      const log = await git.run(['log', '--format=%s%x09%(trailers:only,unfold)', 'main..HEAD'], dir);
      const commits = log.split('\n').filter(Boolean);
      const prefix = roundArtifactKey(input.session_id, input.round_id, '');
      const artifacts = (await artifactStore().list(prefix)).map((k) => k.slice(prefix.length)).sort();
      return { report, commits, artifacts };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  beforeAll(async () => {
    reference = await temporalHarness('crash-reference', testActivities());
    const input = partial(await bed());
    const result = await reference.client.workflow.execute(driftRound, {
      taskQueue: reference.taskQueue,
      workflowId: driftRoundWorkflowId(input.session_id, input.round_id),
      args: [input],
    });
    expected = await outcome(input, result);
    expect(expected.report.outcome).toBe('Succeeded');
    expect(expected.commits.length).toBeGreaterThan(0);
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(beds.map((b) => b.destroy()));
    await reference?.close();
  });

  // The phases run side by side, each on its own queue, test bed and worker processes.
  it.concurrent.for(PHASES)(
    'killed $name: same report, no duplicate commit, no artifact twice',
    async (phase, { expect }) => {
      const queue = `crash-${randomUUID().slice(0, 8)}`;
      const first = await workerProcess(queue);
      children.push(first);
      const input = partial(await bed());
      const workflowId = driftRoundWorkflowId(input.session_id, input.round_id);
      const handle = await reference.client.workflow.start(driftRound, {
        taskQueue: queue,
        workflowId,
        args: [input],
      });

      if (phase.inFlight) await untilActivityRunning(handle, phase.inFlight);
      else {
        for (let i = 0; !phase.now?.((await handle.fetchHistory()).events ?? []); i++) {
          if (i > 2400) throw new Error(`phase "${phase.name}" never came`);
          await new Promise((r) => setTimeout(r, 25));
        }
      }
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      children.push(await workerProcess(queue));

      const result = await handle.result();
      expect(result.status).toBe('completed');
      const got = await outcome(input, result);
      expect(got.report.outcome).toBe(expected.report.outcome);
      expect(got.report.remediated_resources?.map((r) => r.address).sort()).toEqual(
        expected.report.remediated_resources?.map((r) => r.address).sort(),
      );
      expect(got.report.unreconciled_drift ?? []).toEqual(expected.report.unreconciled_drift ?? []);
      expect(got.commits.length).toBe(expected.commits.length);
      expect(new Set(got.commits).size).toBe(got.commits.length);
      expect(got.artifacts).toEqual(expected.artifacts);
      if (phase.inFlight) {
        const events = (await handle.fetchHistory()).events ?? [];
        const retried = events.some(
          (e) =>
            (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1 &&
            activityType(events, e.activityTaskStartedEventAttributes?.scheduledEventId) === phase.inFlight,
        );
        expect(retried, `${phase.inFlight} retried after the crash`).toBe(true);
      }
    },
  );
});
