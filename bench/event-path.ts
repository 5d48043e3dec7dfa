// Where a round event's delivery time goes, read from the round workflow's own history: each
// event's `at` (the workflow task that recorded it) → the `recordRoundEvents` activity that carries
// it is scheduled (the task's completion, and any write still in flight before it) → started (task
// dispatch to a worker) → the store's NOTIFY heard by the API's hub → read by the subscriber.
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import type { RoundEvent } from '../shared/contracts';

export const SEGMENTS = [
  'behind a write',
  'task→scheduled',
  'scheduled→started',
  'started→notify',
  'notify→read',
] as const;
export type Segment = (typeof SEGMENTS)[number];

export interface Delivery {
  roundId: string;
  seq: number;
  at: number;
  /** When the subscriber (stream or page) saw it. */
  seen: number;
  what?: string;
}

/** Per-segment milliseconds of each delivery found in its round's history. */
export async function eventPathBreakdown(
  client: Client,
  workflowIdOf: (roundId: string) => string,
  deliveries: Delivery[],
  notifies: number[],
): Promise<Record<Segment, number[]> & { worst: string[] }> {
  const out = Object.fromEntries(SEGMENTS.map((s) => [s, [] as number[]])) as Record<Segment, number[]>;
  const converter = (
    client.options as unknown as { loadedDataConverter: Parameters<typeof decodeArrayFromPayloads>[0] }
  ).loadedDataConverter;
  const rows: { total: number; line: string }[] = [];
  const sortedNotifies = [...notifies].sort((a, b) => a - b);
  for (const roundId of new Set(deliveries.map((d) => d.roundId))) {
    const history = await client.workflow.getHandle(workflowIdOf(roundId)).fetchHistory();
    const scheduled = new Map<number, { at: number; task: number; done: number; seqs: number[] }>();
    const started = new Map<number, number>();
    const taskStarted = new Map<number, number>();
    const taskDone = new Map<number, number>();
    let lastTaskStart = 0;
    for (const e of history.events ?? []) {
      if (e.workflowTaskStartedEventAttributes) lastTaskStart = tsToMs(e.eventTime);
      if (e.workflowTaskCompletedEventAttributes) {
        taskStarted.set(Number(e.eventId), lastTaskStart);
        taskDone.set(Number(e.eventId), tsToMs(e.eventTime));
      }
      const a = e.activityTaskScheduledEventAttributes;
      if (a?.activityType?.name === 'recordRoundEvents') {
        const [input] = (await decodeArrayFromPayloads(converter, a.input?.payloads)) as [
          { events: RoundEvent[] },
        ];
        scheduled.set(Number(e.eventId), {
          at: tsToMs(e.eventTime),
          task: taskStarted.get(Number(a.workflowTaskCompletedEventId)) ?? lastTaskStart,
          done: taskDone.get(Number(a.workflowTaskCompletedEventId)) ?? 0,
          seqs: input.events.map((x) => x.seq),
        });
      }
      const s = e.activityTaskStartedEventAttributes;
      if (s) started.set(Number(s.scheduledEventId), tsToMs(e.eventTime));
    }
    for (const [id, sch] of scheduled) {
      const start = started.get(id);
      if (start === undefined) continue;
      const heard = sortedNotifies.find((t) => t >= start);
      for (const d of deliveries.filter((x) => x.roundId === roundId && sch.seqs.includes(x.seq))) {
        // An event recorded while the write before it was under way goes out with a later task.
        out['behind a write'].push(Math.max(0, sch.task - d.at));
        out['task→scheduled'].push(sch.at - Math.max(sch.task, d.at));
        out['scheduled→started'].push(start - sch.at);
        if (heard !== undefined && heard <= d.seen) {
          out['started→notify'].push(heard - start);
          out['notify→read'].push(d.seen - heard);
        }
        rows.push({
          total: d.seen - d.at,
          line: `${d.what ?? d.seq} ${d.seen - d.at} ms: behind ${Math.max(0, sch.task - d.at)}, scheduled ${sch.at - Math.max(sch.task, d.at)} (task started→completed ${sch.done - sch.task}), started ${start - sch.at}, notify ${heard !== undefined ? heard - start : '?'}, read ${heard !== undefined ? d.seen - heard : '?'}`,
        });
      }
    }
  }
  return {
    ...out,
    worst: rows
      .sort((a, b) => b.total - a.total)
      .slice(0, 5)
      .map((r) => r.line),
  };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

export function breakdownLine(b: Record<Segment, number[]>): string {
  return SEGMENTS.map(
    (s) => `${s} p50 ${Math.round(percentile(b[s], 50))} / p95 ${Math.round(percentile(b[s], 95))} ms`,
  ).join(', ');
}

/**
 * Where a workflow's wall time goes: each activity type's count and time from scheduled to
 * completed, and the time no activity of the main path (any but `beside`) was scheduled or running —
 * the workflow's own tasks and their hand-offs.
 */
export async function activityTimeline(
  client: Client,
  workflowId: string,
  beside: string[] = ['recordRoundEvents'],
): Promise<{
  byType: Map<string, { n: number; ms: number }>;
  idleMs: number;
  wallMs: number;
  /** Main-path activity time spent beside another main-path activity (their sum less their union). */
  besideMs: number;
  /** Each main-path activity, scheduled to completed, in ms from the workflow's first event. */
  spans: { type: string; startMs: number; endMs: number }[];
}> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const scheduled = new Map<number, { type: string; at: number }>();
  const spans: [number, number][] = [];
  const named: { type: string; startMs: number; endMs: number }[] = [];
  const byType = new Map<string, { n: number; ms: number }>();
  for (const e of events) {
    const a = e.activityTaskScheduledEventAttributes;
    if (a) scheduled.set(Number(e.eventId), { type: a.activityType?.name ?? '?', at: tsToMs(e.eventTime) });
    const done =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes;
    if (done) {
      const s = scheduled.get(Number(done.scheduledEventId));
      if (!s) continue;
      const end = tsToMs(e.eventTime);
      const t = byType.get(s.type) ?? { n: 0, ms: 0 };
      byType.set(s.type, { n: t.n + 1, ms: t.ms + end - s.at });
      if (!beside.includes(s.type)) {
        spans.push([s.at, end]);
        named.push({ type: s.type, startMs: s.at, endMs: end });
      }
    }
  }
  const first = tsToMs(events[0]?.eventTime);
  const last = tsToMs(events[events.length - 1]?.eventTime);
  spans.sort((x, y) => x[0] - y[0]);
  let covered = 0;
  let reach = first;
  for (const [s, e] of spans) {
    if (e <= reach) continue;
    covered += e - Math.max(s, reach);
    reach = e;
  }
  const total = spans.reduce((sum, [s, e]) => sum + e - s, 0);
  return {
    byType,
    idleMs: last - first - covered,
    wallMs: last - first,
    besideMs: total - covered,
    spans: named
      .map((n) => ({ type: n.type, startMs: n.startMs - first, endMs: n.endMs - first }))
      .sort((x, y) => x.startMs - y.startMs),
  };
}
