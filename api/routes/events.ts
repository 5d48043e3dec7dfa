// GET /api/v1/events/subscribe/{session_id}: server-sent events for every round accepted, status
// change, artifact, report and round end of a session. Event ids are `<round>.<seq>` (the round's
// place in the session, the event's place in the round), stable across connections, so a client
// that reconnects with Last-Event-ID gets exactly what it missed. The stream polls the session
// (queries add nothing to workflow history) and closes after
// orchestration.max_session_events_iteration polls.
import { Router, type Response } from 'express';
import type { RoundEvent, SessionState } from '../../shared/contracts';
import { sessionWorkflowId } from '../../shared/ids';
import { roundProgressQuery, sessionQuery } from '../../shared/messages';
import { authenticate, requireRole } from '../auth';
import type { SessionDetailDeps } from './sessions';
import { ownSession } from './drift';

export interface EventsDeps extends SessionDetailDeps {
  pollMs: number;
  maxPolls: number;
}

type EventId = [number, number];
const ROUND_END = 1_000_000;
const TERMINAL = new Set(['completed', 'uncompleted', 'failed']);

export function parseEventId(raw: unknown): EventId {
  if (typeof raw !== 'string') return [0, -1];
  const m = /^(\d+)\.(\d+)$/.exec(raw.trim());
  return m ? [Number(m[1]), Number(m[2])] : [0, -1];
}

const after = (a: EventId, b: EventId): boolean => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);

interface SseEvent {
  id: EventId;
  event: string;
  data: Record<string, unknown>;
}

function write(res: Response, e: SseEvent): void {
  res.write(`id: ${e.id[0]}.${e.id[1]}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
}

export function createEventsRouter(deps: EventsDeps): Router {
  const router = Router();
  router.get(
    '/api/v1/events/subscribe/:id',
    authenticate(deps.db),
    requireRole('developer'),
    async (req, res) => {
      const row = await ownSession(deps, req, req.params.id as string);
      const sessionId = row.session_id;
      let cursor = parseEventId(req.get('last-event-id') ?? req.query.last_event_id);
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();
      let closed = false;
      req.on('close', () => (closed = true));
      const handle = deps.client.workflow.getHandle(sessionWorkflowId(sessionId));
      // Rounds whose events are all sent once they ended: never queried again on this connection.
      const done = new Set<number>();
      let lastBeat = Date.now();

      const collect = async (state: SessionState): Promise<SseEvent[]> => {
        const out: SseEvent[] = [];
        for (const [i, round] of state.rounds.entries()) {
          const n = i + 1;
          if (done.has(n)) continue;
          out.push({
            id: [n, 0],
            event: 'round',
            data: { round_id: round.round_id, kind: round.kind, text: round.text },
          });
          let events: RoundEvent[] = [];
          const roundWorkflowId = round.workflow_id;
          if (roundWorkflowId) {
            try {
              events = (
                await deps.client.withDeadline(Date.now() + 10_000, () =>
                  deps.client.workflow.getHandle(roundWorkflowId).query(roundProgressQuery),
                )
              ).events;
            } catch {
              events = []; // the child is not started yet: its events come on a later poll
            }
          }
          for (const e of events) {
            const data: Record<string, unknown> = { round_id: round.round_id, ...e };
            if (e.key && (e.type === 'artifact' || e.type === 'report')) {
              data.url = await deps.artifacts.presignGet(e.key, deps.presignTtlSeconds);
            }
            out.push({ id: [n, e.seq], event: e.type, data });
          }
          if (TERMINAL.has(round.status)) {
            out.push({
              id: [n, ROUND_END],
              event: 'round_end',
              data: {
                round_id: round.round_id,
                status: round.status,
                session_status: state.status,
                ...(round.outcome ? { outcome: round.outcome } : {}),
                ...(round.failure_reason ? { failure_reason: round.failure_reason } : {}),
                ...(round.reason ? { reason: round.reason } : {}),
              },
            });
            done.add(n);
          }
        }
        return out;
      };

      for (let poll = 0; poll < deps.maxPolls && !closed; poll++) {
        try {
          const state = await deps.client.withDeadline(Date.now() + 10_000, () => handle.query(sessionQuery));
          for (const e of await collect(state)) {
            if (!after(e.id, cursor)) continue;
            write(res, e);
            cursor = e.id;
          }
        } catch (err) {
          res.write(
            `event: error\ndata: ${JSON.stringify({ message: `session state unavailable: ${(err as Error).message}` })}\n\n`,
          );
        }
        if (Date.now() - lastBeat > 15_000) {
          res.write(': keep-alive\n\n');
          lastBeat = Date.now();
        }
        await new Promise((r) => setTimeout(r, deps.pollMs));
      }
      if (!closed) {
        res.write(
          `event: close\ndata: ${JSON.stringify({ reason: 'orchestration.max_session_events_iteration reached; reconnect with Last-Event-ID to continue' })}\n\n`,
        );
        res.end();
      }
    },
  );
  return router;
}
