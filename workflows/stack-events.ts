// A stack's event-driven detections (`drift-events:<stack>`, started or joined by the audit-event
// endpoint with signal-with-start): the audit events that touched the stack's resources are
// gathered for a moment — a burst on one resource, or many, is one run — and a targeted detection
// (`stackDetection` with `-target` of exactly the touched addresses) runs as a child; events that
// arrive meanwhile make the next run. The schedule stays the safety net. The workflow ends once no
// event has come for a minute; the next event starts it again.
import {
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { AuditSummary } from '../shared/audit-events';
import { auditChangeSignal } from '../shared/messages';
import { stackDetection } from './stack-detection';

/** How long the first event of a run waits for the rest of its burst. */
export const GATHER_MS = 1000;
/** Idle this long, the workflow ends. */
const IDLE = '1 minute';
/** Runs per workflow history before it continues as new. */
const RUNS_PER_HISTORY = 50;

export interface StackEventsInput {
  stack_uuid: string;
  /** What was pending when the last history continued as new. */
  pending?: { addresses: string[]; changes: AuditSummary[] };
  runs?: number;
}

export async function stackEvents(input: StackEventsInput): Promise<{ runs: number }> {
  const addresses = new Set<string>(input.pending?.addresses ?? []);
  const changes = new Map<string, AuditSummary>((input.pending?.changes ?? []).map((c) => [c.event_id, c]));
  setHandler(auditChangeSignal, (s) => {
    for (const a of s.addresses) addresses.add(a);
    for (const c of s.changes) changes.set(c.event_id, c);
  });
  let runs = input.runs ?? 0;
  for (let here = 0; here < RUNS_PER_HISTORY; here++) {
    if (!(await condition(() => addresses.size > 0, IDLE))) return { runs };
    await sleep(GATHER_MS);
    const targets = [...addresses].sort();
    const audit = [...changes.values()].sort((a, b) => b.at.localeCompare(a.at));
    addresses.clear();
    changes.clear();
    runs += 1;
    setCurrentDetails(`Run ${runs}: ${targets.length} address(es) touched by ${audit.length} event(s)`);
    try {
      await executeChild(stackDetection, {
        workflowId: `${workflowInfo().workflowId}:${runs}:${audit[0]?.event_id ?? 'event'}`.slice(0, 255),
        args: [{ stack_uuid: input.stack_uuid, targets, audit }],
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      // The run recorded its own failure (detection runs, webhook); the next events still run.
    }
  }
  const pending = { addresses: [...addresses], changes: [...changes.values()] };
  if (pending.addresses.length === 0) return { runs };
  return continueAsNew<typeof stackEvents>({ stack_uuid: input.stack_uuid, pending, runs });
}
