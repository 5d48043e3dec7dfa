// GET /api/v1/events/subscribe/{session_id}: server-sent events of a session — every round
// accepted, status change, artifact, report, pull request, refusal and round end — read from the
// session's event log in the metadata store (shared/infra/db/sessions.ts), never from Temporal: a
// finished session's events outlive its workflow. Event ids are the log's sequence numbers, the
// same on every connection, so a client that reconnects with Last-Event-ID gets exactly what it
// missed. With the events hub (api/events-hub.ts) a stream reads the store only when the session
// changed — a NOTIFY from the transaction that wrote it —, otherwise every
// orchestration.session_events_poll_ms; it closes after orchestration.max_session_events_iteration
// of those intervals. When users change (a token revoked, a role changed: USERS_CHANGED on the
// hub), every open stream checks its own credential again and ends at once if it no longer holds.
import { Router, type Response } from 'express';
import { z } from 'zod';
import { eventsAfter, type SessionEventRow } from '../../shared/infra/db/sessions';
import { authenticate, currentUser, requireRole, stillAuthenticated, USERS_CHANGED } from '../auth';
import { mayFetchArtifact } from '../artifact-access';
import { ownSession } from '../session-operations';
import type { EventsHub } from '../events-hub';
import { operation, route, sessionIdParam } from '../contract';
import type { SessionDetailDeps } from './sessions';

export interface EventsDeps extends SessionDetailDeps {
  pollMs: number;
  maxPolls: number;
  /** This process's LISTEN connection; absent: every stream polls. */
  hub?: EventsHub;
  /** Told when a stream opens and when it ends (the API's open-streams gauge). */
  streams?: { opened(): void; closed(): void };
}

/** The sequence number a client saw last (Last-Event-ID); 0 for none or anything unreadable. */
export function parseEventId(raw: unknown): number {
  if (typeof raw !== 'string' || !/^\d{1,9}$/.test(raw.trim())) return 0;
  return Number(raw.trim());
}

function write(res: Response, id: number, event: string, data: Record<string, unknown>): void {
  if (res.writableEnded) return;
  res.write(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

const lastEventId = z
  .string()
  .max(16)
  .optional()
  .describe('The id of the last event seen: the stream resumes after it');

export const eventOperations = {
  subscribe: operation({
    method: 'get',
    path: '/api/v1/events/subscribe/:id',
    summary:
      'Server-sent events of a session (developer): rounds accepted, status changes, artifacts, reports, pull requests, refusals, round ends; resume with Last-Event-ID',
    params: sessionIdParam,
    headers: { 'Last-Event-ID': lastEventId },
    query: z.object({ last_event_id: lastEventId }),
    responses: {
      200: {
        description: 'The event stream: `id: <sequence>`, `event: <type>`, `data: <JSON>` per event',
        mediaType: 'text/event-stream',
      },
    },
    errors: [401, 403, 404],
  }),
};

export function createEventsRouter(deps: EventsDeps): Router {
  const router = Router();
  // One read of a session's log serves every stream of this process that asks for the same page
  // at the same moment: a change wakes all of a session's streams at once, and a thousand tabs on
  // one session cost one query, not a thousand. A read joins only one started after the session's
  // latest change: a read already under way when a change arrives may have missed it.
  const reading = new Map<string, Promise<SessionEventRow[]>>();
  deps.hub?.onChange((id) => {
    // A read under way may have missed this change: later streams start their own.
    for (const k of reading.keys()) if (id === null || k.startsWith(`${id}\n`)) reading.delete(k);
  });
  const readShared = (sessionId: string, after: number): Promise<SessionEventRow[]> => {
    const k = `${sessionId}\n${after}`;
    let p = reading.get(k);
    if (!p) {
      const read = eventsAfter(deps.db, sessionId, after).finally(() => {
        if (reading.get(k) === read) reading.delete(k);
      });
      reading.set(k, read);
      p = read;
    }
    return p;
  };

  route(
    router,
    eventOperations.subscribe,
    authenticate(deps.db),
    requireRole('developer'),
    async (req, res) => {
      const row = await ownSession(deps, req, req.params.id as string);
      const sessionId = row.session_id;
      const { role } = currentUser(req);
      let cursor = parseEventId(req.get('last-event-id') ?? req.query.last_event_id);
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();
      let closed = false;
      const watch = deps.hub?.watch(sessionId);
      deps.streams?.opened();
      res.once('close', () => deps.streams?.closed());
      const end = (reason: string) => {
        if (closed) return;
        closed = true;
        watch?.close();
        if (!res.writableEnded) {
          res.write(`event: close\ndata: ${JSON.stringify({ reason })}\n\n`);
          res.end();
        }
      };
      const stopHearing = deps.hub?.onChange((id) => {
        if (id !== USERS_CHANGED && id !== null) return;
        stillAuthenticated(deps.db, req)
          .then((ok) => {
            if (!ok) end('credentials revoked or changed; sign in again');
          })
          .catch(() => undefined);
      });
      req.on('close', () => {
        closed = true;
        watch?.close();
        stopHearing?.();
      });
      let lastBeat = Date.now();

      const send = async (e: SessionEventRow): Promise<void> => {
        const data: Record<string, unknown> = { ...e.data };
        const key = data.key;
        // A raw plan's URL only for devops and admin (api/artifact-access.ts); the event itself says it exists.
        if (
          typeof key === 'string' &&
          (e.type === 'artifact' || e.type === 'report') &&
          mayFetchArtifact(key, role)
        ) {
          data.url = (await deps.artifacts.presignReused(key, deps.presignTtlSeconds)).url;
        }
        write(res, e.seq, e.type, data);
      };

      let look = true;
      // maxPolls counts the intervals that ended without a change: it bounds how long a stream
      // stays open (max_session_events_iteration × session_events_poll_ms), whatever it delivers.
      for (let poll = 0; poll < deps.maxPolls && !closed;) {
        let failed = false;
        if (look) {
          try {
            // A long backlog drains in pages before the stream waits again.
            for (let page = await readShared(sessionId, cursor); page.length > 0 && !closed;) {
              for (const e of page) {
                await send(e);
                cursor = e.seq;
              }
              page = page.length < 500 ? [] : await readShared(sessionId, cursor);
            }
          } catch (err) {
            failed = true;
            if (!res.writableEnded)
              res.write(
                `event: error\ndata: ${JSON.stringify({ message: `session events unavailable: ${(err as Error).message}` })}\n\n`,
              );
          }
        }
        if (Date.now() - lastBeat > 15_000 && !closed) {
          res.write(': keep-alive\n\n');
          lastBeat = Date.now();
        }
        // Sleep until the session changes or the interval ends; while the hub has no connection
        // (it wakes every stream when it connects again) each interval looks, as a poll.
        const woke = watch ? await watch.next(deps.pollMs) : false;
        if (!watch) await new Promise((r) => setTimeout(r, deps.pollMs));
        if (!woke) poll++;
        look = !watch || woke || failed || !deps.hub?.connected;
      }
      stopHearing?.();
      end('orchestration.max_session_events_iteration reached; reconnect with Last-Event-ID to continue');
    },
  );
  return router;
}
