// One LISTEN connection per API process on the metadata store's `kumoss_session_events` channel
// (shared/infra/db/sessions.ts notifies it in the transaction that records a session's rounds, status or
// events), fanned out to every event stream of that session in this process: a subscriber sleeps
// until its session changes instead of polling the store. The connection reconnects with backoff;
// while it is down the streams fall back to polling (`connected` is false).
import pg from 'pg';
import { SESSION_EVENTS_CHANNEL } from '../shared/infra/db/sessions';

/** One event stream's watch on its session: notifications mark it changed. */
export interface SessionWatch {
  /** Resolves true at once if the session changed since the last call, or when it changes; false after `ms`. */
  next(ms: number): Promise<boolean>;
  close(): void;
}

export interface EventsHub {
  watch(sessionId: string): SessionWatch;
  /** Says at once in this process that a session changed (its own write; others hear the NOTIFY). */
  changed(sessionId: string): void;
  /**
   * Calls `listener` with each changed session id, or null when anything may have changed; the
   * returned function stops it.
   */
  onChange(listener: (sessionId: string | null) => void): () => void;
  /** Whether notifications are arriving (else the streams poll). */
  readonly connected: boolean;
  close(): Promise<void>;
}

interface Watcher {
  dirty: boolean;
  go?: () => void;
}

export function startEventsHub(
  databaseUrl: string,
  log: (err: unknown) => void = () => undefined,
): EventsHub {
  const watchers = new Map<string, Set<Watcher>>();
  let client: pg.Client | undefined;
  let connected = false;
  let closed = false;
  let backoff = 250;

  const changeListeners: ((sessionId: string | null) => void)[] = [];
  const mark = (w: Watcher): void => {
    w.dirty = true;
    w.go?.();
  };
  const wake = (sessionId: string): void => {
    for (const l of [...changeListeners]) l(sessionId);
    for (const w of watchers.get(sessionId) ?? []) mark(w);
  };
  const wakeAll = (): void => {
    for (const l of [...changeListeners]) l(null);
    for (const set of watchers.values()) for (const w of set) mark(w);
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: databaseUrl });
    c.on('notification', (n) => {
      if (n.channel === SESSION_EVENTS_CHANNEL && n.payload) wake(n.payload);
    });
    const lost = (err?: unknown): void => {
      if (client !== c) return;
      client = undefined;
      connected = false;
      if (err) log(err);
      void c.end().catch(() => undefined);
      wakeAll(); // whatever changed meanwhile is read by the streams' next look
      if (!closed) setTimeout(() => void connect(), backoff);
      backoff = Math.min(backoff * 2, 10_000);
    };
    c.on('error', lost);
    c.on('end', () => lost());
    try {
      await c.connect();
      await c.query(`LISTEN ${SESSION_EVENTS_CHANNEL}`);
      client = c;
      connected = true;
      backoff = 250;
      wakeAll(); // changes made before the LISTEN took effect
    } catch (err) {
      client = c;
      lost(err);
    }
  };
  void connect();

  return {
    get connected() {
      return connected;
    },
    changed(sessionId) {
      wake(sessionId);
    },
    onChange(listener) {
      changeListeners.push(listener);
      return () => {
        const i = changeListeners.indexOf(listener);
        if (i >= 0) changeListeners.splice(i, 1);
      };
    },
    watch(sessionId) {
      // Clean: the stream reads the backlog after it starts watching, so a change from then on is
      // seen by that read or marks the watch.
      const w: Watcher = { dirty: false };
      let set = watchers.get(sessionId);
      if (!set) watchers.set(sessionId, (set = new Set()));
      set.add(w);
      return {
        next(ms) {
          if (w.dirty) {
            w.dirty = false;
            return Promise.resolve(true);
          }
          return new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => {
              w.go = undefined;
              resolve(false);
            }, ms);
            w.go = () => {
              clearTimeout(timer);
              w.go = undefined;
              w.dirty = false;
              resolve(true);
            };
          });
        },
        close() {
          w.go?.();
          set.delete(w);
          if (set.size === 0 && watchers.get(sessionId) === set) watchers.delete(sessionId);
        },
      };
    },
    async close() {
      closed = true;
      const c = client;
      client = undefined;
      connected = false;
      wakeAll();
      await c?.end().catch(() => undefined);
    },
  };
}
