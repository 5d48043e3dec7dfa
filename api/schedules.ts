// The Temporal Schedules of drift detection: one per stack (`drift-schedule:<stack>`, runs of
// `stackDetection`) and one per runner group that has asked for one (`runner-schedule:<group>`,
// runs of `runner.environment-drift-detect`). The spec comes from a schedule of the API (an
// interval or a cron expression in a time zone, with jitter); overlap policy skip (a run still
// going makes the next one wait for the one after); the stack or group as a search attribute. The
// API changes schedules through Temporal only; the runs are the worker's.
import {
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleSpec,
} from '@temporalio/client';
import { DETECT_WORKFLOW_TYPE, runnerScheduleId } from '../shared/runner-contracts';
import { HttpError } from './errors';
import { KumossOrganization, KumossRunnerGroup, KumossStack } from '../shared/search-attributes';
import {
  stackDetectionWorkflowType,
  stackScheduleId,
  type ScheduleState,
  type Stack,
  type StackSchedule,
} from '../shared/stack-contracts';
import { runnerDetectWorkflowId, stackDetectionWorkflowId } from '../shared/ids';

/** The 503 of a route whose schedule change Temporal did not take (nothing was changed). */
export function scheduleUnavailable(err: unknown): never {
  if (err instanceof HttpError) throw err;
  throw new HttpError(
    503,
    'temporal_unavailable',
    `The schedule could not be changed: ${(err as Error).message}. Nothing was changed; try again.`,
  );
}

function spec(s: StackSchedule): ScheduleSpec {
  return {
    ...(s.interval_minutes !== undefined ? { intervals: [{ every: `${s.interval_minutes}m` }] } : {}),
    ...(s.cron !== undefined ? { cronExpressions: [s.cron] } : {}),
    ...(s.time_zone ? { timezone: s.time_zone } : {}),
    ...(s.jitter_seconds ? { jitter: `${s.jitter_seconds}s` } : {}),
  };
}

/**
 * How long pause, resume and a run now wait for the schedule to describe itself as the call left
 * it: within a request's Temporal deadline (10 s, api/app.ts), so a slow server's answer is the
 * state it describes, never a 503 saying nothing changed after the change was sent.
 */
const SETTLE_MS = 8_000;

/** Pause, resume, trigger, backfill, delete and describe the schedule of a key (a stack, a group). */
class Schedules {
  constructor(
    protected readonly client: Client,
    protected readonly taskQueue: string,
    private readonly idOf: (key: string) => string,
    /** The key's kind in answers: "this stack", "this runner group". */
    private readonly subject: string,
  ) {}

  protected handle(key: string) {
    return this.client.schedule.getHandle(this.idOf(key));
  }

  /** Removes the schedule; one already gone is fine (a retried delete). */
  async delete(key: string): Promise<void> {
    try {
      await this.handle(key).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }

  async pause(key: string, note?: string): Promise<void> {
    await this.handle(key).pause(note || 'Paused from the Kumoss API');
    await this.settled(key, true);
  }

  async resume(key: string, note?: string): Promise<void> {
    await this.handle(key).unpause(note || 'Resumed from the Kumoss API');
    await this.settled(key, false);
  }

  /**
   * Waits until the schedule describes itself as `paused`: the server applies a pause or resume to
   * the schedule after the call returns (its scheduler workflow takes the patch on its next
   * workflow task), and a describe in between — the answer, the page's refresh — would still show
   * the state before it. On a loaded server that task can wait several seconds, so the bound is
   * the request's, not a guess at the usual lag.
   */
  private async settled(key: string, paused: boolean): Promise<void> {
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      const d = await this.handle(key).describe();
      if (d.state.paused === paused || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * A run now, answered with the run's workflow id once the schedule has started it. While a run of
   * the schedule is going the overlap policy would skip it: that is a 409 naming the run, not an
   * answer that something started. The schedule names a run's workflow after the second it starts
   * in, and a run named like an earlier one starts nothing: a run now in the second of the last
   * run waits for the next second.
   */
  async trigger(key: string): Promise<string> {
    const handle = this.handle(key);
    const before = (await handle.describe()).info;
    const busy = (workflowId: string) =>
      new HttpError(
        409,
        'run_in_progress',
        `A detection of ${this.subject} is running (${workflowId}); a run now is skipped while one runs. Try again when it has ended.`,
      );
    const running = before.runningActions[0];
    if (running) throw busy(running.workflow.workflowId);
    const seen = new Set(before.recentActions.map((a) => a.action.workflow.firstExecutionRunId));
    const lastSecond = Math.max(
      0,
      ...before.recentActions.map((a) => Math.floor(Math.max(+a.scheduledAt, +a.takenAt) / 1000)),
    );
    while (Math.floor(Date.now() / 1000) <= lastSecond)
      await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
    await handle.trigger(ScheduleOverlapPolicy.SKIP);
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      const now = (await handle.describe()).info;
      const fresh = [...now.recentActions.map((a) => a.action), ...now.runningActions].find(
        (a) => !seen.has(a.workflow.firstExecutionRunId),
      );
      // A run the schedule started itself between the look above and the trigger is the run now.
      if (fresh) return fresh.workflow.workflowId;
      if (now.numActionsSkippedOverlap > before.numActionsSkippedOverlap)
        throw busy(now.runningActions[0]?.workflow.workflowId ?? 'a run started just before');
      if (Date.now() > deadline)
        throw new HttpError(
          503,
          'temporal_unavailable',
          `The schedule took the run now but did not start it within ${SETTLE_MS / 1000} s; the runs list shows it once it starts.`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The runs a missed window would have had, one after the other. */
  backfill(key: string, start: Date, end: Date): Promise<void> {
    return this.handle(key).backfill({ start, end, overlap: ScheduleOverlapPolicy.BUFFER_ALL });
  }

  async state(key: string): Promise<ScheduleState | null> {
    try {
      const d = await this.handle(key).describe();
      return {
        schedule_id: d.scheduleId,
        paused: d.state.paused,
        note: d.state.note ?? null,
        next_runs: d.info.nextActionTimes.slice(0, 5).map((t) => t.toISOString()),
        recent_runs: d.info.recentActions.slice(-10).map((a) => ({
          scheduled_at: a.scheduledAt.toISOString(),
          workflow_id: a.action.workflow.workflowId,
        })),
      };
    } catch (err) {
      if (err instanceof ScheduleNotFoundError) return null;
      throw err;
    }
  }
}

export class StackSchedules extends Schedules {
  constructor(client: Client, taskQueue: string) {
    super(client, taskQueue, stackScheduleId, 'this stack');
  }

  async create(stack: Stack): Promise<void> {
    await this.client.schedule.create({
      scheduleId: stackScheduleId(stack.stack_uuid),
      spec: spec(stack.schedule),
      action: {
        type: 'startWorkflow',
        workflowType: stackDetectionWorkflowType,
        workflowId: stackDetectionWorkflowId(stack.stack_uuid),
        taskQueue: this.taskQueue,
        args: [{ stack_uuid: stack.stack_uuid }],
        typedSearchAttributes: [
          { key: KumossStack, value: stack.stack_uuid },
          { key: KumossOrganization, value: stack.organization_uuid },
        ],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour' },
      typedSearchAttributes: [
        { key: KumossStack, value: stack.stack_uuid },
        { key: KumossOrganization, value: stack.organization_uuid },
      ],
      memo: { stack: stack.name },
    });
  }

  async update(stack: Stack): Promise<void> {
    await this.client.schedule.getHandle(stackScheduleId(stack.stack_uuid)).update((prev) => ({
      ...prev,
      spec: spec(stack.schedule),
    }));
  }
}

/** A runner group's schedule as the API shows it: its times and whether its runs may apply. */
export interface RunnerSchedule {
  schedule: StackSchedule;
  auto_apply: boolean;
}

export class RunnerSchedules extends Schedules {
  constructor(client: Client, taskQueue: string) {
    super(client, taskQueue, runnerScheduleId, 'this runner group');
  }

  /**
   * Creates or replaces the group's schedule: each run is `runner.environment-drift-detect` on the
   * group, applying its repairs only when `auto_apply` says so (off by default), started on behalf
   * of the devops who set the schedule.
   */
  async put(
    group: { runner_group_uuid: string; organization_uuid: string; name: string },
    s: RunnerSchedule,
    actor_uuid: string,
  ): Promise<void> {
    const action = {
      type: 'startWorkflow' as const,
      workflowType: DETECT_WORKFLOW_TYPE,
      workflowId: runnerDetectWorkflowId(group.runner_group_uuid),
      taskQueue: this.taskQueue,
      args: [
        {
          runner_group_uuid: group.runner_group_uuid,
          organization_uuid: group.organization_uuid,
          auto_apply: s.auto_apply,
          actor_uuid,
        },
      ],
      memo: { organization_uuid: group.organization_uuid, runner_group_uuid: group.runner_group_uuid },
      typedSearchAttributes: [
        { key: KumossOrganization, value: group.organization_uuid },
        { key: KumossRunnerGroup, value: group.runner_group_uuid },
      ],
    };
    const h = this.handle(group.runner_group_uuid);
    try {
      // An existing schedule keeps its state (paused or not, its note, its recent runs).
      await h.update((prev) => ({ ...prev, spec: spec(s.schedule), action }));
      return;
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    await this.client.schedule.create({
      scheduleId: runnerScheduleId(group.runner_group_uuid),
      spec: spec(s.schedule),
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour' },
      typedSearchAttributes: [
        { key: KumossRunnerGroup, value: group.runner_group_uuid },
        { key: KumossOrganization, value: group.organization_uuid },
      ],
      memo: { runner_group: group.name },
    });
  }
}
