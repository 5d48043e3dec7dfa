// The Temporal Schedule of each stack (`drift-schedule:<stack>`): its spec from the stack's
// schedule (an interval or a cron expression in a time zone, with jitter), overlap policy skip (a
// run still planning makes the next one wait for the one after), the stack id as a search
// attribute. The API changes schedules through Temporal only; the runs are the worker's.
import {
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleSpec,
} from '@temporalio/client';
import { KumossOrganization, KumossStack } from '../shared/search-attributes';
import {
  stackDetectionWorkflowType,
  stackScheduleId,
  type Stack,
  type StackSchedule,
} from '../shared/stack-contracts';

export interface ScheduleState {
  schedule_id: string;
  paused: boolean;
  note: string | null;
  next_runs: string[];
  recent_runs: { scheduled_at: string; workflow_id: string }[];
}

function spec(s: StackSchedule): ScheduleSpec {
  return {
    ...(s.interval_minutes !== undefined ? { intervals: [{ every: `${s.interval_minutes}m` }] } : {}),
    ...(s.cron !== undefined ? { cronExpressions: [s.cron] } : {}),
    ...(s.time_zone ? { timezone: s.time_zone } : {}),
    ...(s.jitter_seconds ? { jitter: `${s.jitter_seconds}s` } : {}),
  };
}

export class StackSchedules {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  async create(stack: Stack): Promise<void> {
    await this.client.schedule.create({
      scheduleId: stackScheduleId(stack.stack_uuid),
      spec: spec(stack.schedule),
      action: {
        type: 'startWorkflow',
        workflowType: stackDetectionWorkflowType,
        workflowId: `drift-detection:${stack.stack_uuid}`,
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

  /** Removes the schedule; one already gone is fine (a retried delete). */
  async delete(stackUuid: string): Promise<void> {
    try {
      await this.client.schedule.getHandle(stackScheduleId(stackUuid)).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }

  pause(stackUuid: string, note?: string): Promise<void> {
    return this.client.schedule
      .getHandle(stackScheduleId(stackUuid))
      .pause(note || 'Paused from the Kumoss API');
  }

  resume(stackUuid: string, note?: string): Promise<void> {
    return this.client.schedule
      .getHandle(stackScheduleId(stackUuid))
      .unpause(note || 'Resumed from the Kumoss API');
  }

  /** A run now (skipped, as any run, while one is still going). */
  trigger(stackUuid: string): Promise<void> {
    return this.client.schedule.getHandle(stackScheduleId(stackUuid)).trigger(ScheduleOverlapPolicy.SKIP);
  }

  /** The runs a missed window would have had, one after the other. */
  backfill(stackUuid: string, start: Date, end: Date): Promise<void> {
    return this.client.schedule
      .getHandle(stackScheduleId(stackUuid))
      .backfill({ start, end, overlap: ScheduleOverlapPolicy.BUFFER_ALL });
  }

  async state(stackUuid: string): Promise<ScheduleState | null> {
    try {
      const d = await this.client.schedule.getHandle(stackScheduleId(stackUuid)).describe();
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
