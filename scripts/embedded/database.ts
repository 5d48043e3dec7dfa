// The embedded metadata store: PGlite (PostgreSQL compiled to WASM, in this process) served over
// the PostgreSQL wire protocol on loopback, so the API and the worker use the same `pg` driver
// they use against a real PostgreSQL (DATABASE_URL).
//
// PGlite is one backend. Several clients share it here by taking turns, a turn lasting from a
// client's first message to the end of its batch (Sync or a simple Query) — and on to the end of
// its transaction when it is in one. @electric-sql/pglite-socket (0.2.17) takes turns per message
// instead, so two clients' extended-protocol batches (Parse, Bind, Execute, Sync) interleave in the
// one backend and fail with `portal "" does not exist` or `bind message supplies 1 parameters,
// but prepared statement "" requires 11` as soon as the API and the worker write at once.
//
// LISTEN/NOTIFY: the one backend hears every NOTIFY and PGlite writes the notification into the
// output of whichever client committed it. The server takes those messages out of that client's
// stream and sends them to the clients that said LISTEN on the channel (simple-protocol
// `LISTEN name` / `UNLISTEN name|*`, as the pg driver sends them).
import { mkdirSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import { freePort } from './ports';

export interface EmbeddedDatabase {
  url: string;
  port: number;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const CANCEL_REQUEST = 80877102;

/** Whose turn it is on the one backend; the others wait in order. */
class Turns {
  private owner: number | null = null;
  private readonly waiting: { id: number; go: () => void }[] = [];

  async take(id: number): Promise<void> {
    if (this.owner === id) return;
    if (this.owner === null) {
      this.owner = id;
      return;
    }
    await new Promise<void>((go) => this.waiting.push({ id, go }));
  }

  give(id: number): void {
    if (this.owner !== id) return;
    const next = this.waiting.shift();
    this.owner = next?.id ?? null;
    next?.go();
  }

  leave(id: number): void {
    const i = this.waiting.findIndex((w) => w.id === id);
    if (i >= 0) this.waiting.splice(i, 1);
    this.give(id);
  }
}

/** Splits a client's bytes into protocol messages (the first, the startup message, has no type). */
function frames(
  buffer: Buffer,
  started: boolean,
): { messages: { message: Buffer; typed: boolean }[]; rest: Buffer; started: boolean } {
  const messages: { message: Buffer; typed: boolean }[] = [];
  let at = 0;
  for (;;) {
    if (!started) {
      if (buffer.length - at < 8) break;
      const len = buffer.readInt32BE(at);
      if (buffer.length - at < len) break;
      const code = buffer.readInt32BE(at + 4);
      messages.push({ message: buffer.subarray(at, at + len), typed: false });
      at += len;
      if (code !== SSL_REQUEST && code !== CANCEL_REQUEST) started = true;
      continue;
    }
    if (buffer.length - at < 5) break;
    const len = 1 + buffer.readInt32BE(at + 1);
    if (buffer.length - at < len) break;
    messages.push({ message: buffer.subarray(at, at + len), typed: true });
    at += len;
  }
  return { messages, rest: buffer.subarray(at), started };
}

/** `LISTEN chan` / `UNLISTEN chan` / `UNLISTEN *` in a simple Query message, if it is one. */
function listenCommand(message: Buffer): { listen: boolean; channel: string } | null {
  if (message[0] !== 0x51) return null; // 'Q'
  const text = message.subarray(5, message.length - 1).toString('utf8');
  const m = /^\s*(UN)?LISTEN\s+(\*|"[^"]+"|[A-Za-z_][\w$]*)\s*;?\s*$/i.exec(text);
  if (!m?.[2]) return null;
  const name = m[2].startsWith('"') ? m[2].slice(1, -1) : m[2].toLowerCase();
  return { listen: !m[1], channel: name };
}

/** The channel of a NotificationResponse message ('A': pid, channel, payload). */
function notificationChannel(message: Buffer): string {
  const start = 9;
  const end = message.indexOf(0, start);
  return message.subarray(start, end < 0 ? message.length : end).toString('utf8');
}

export async function startEmbeddedDatabase(opts: {
  /** Data directory; undefined keeps the database in memory (tests). */
  dataDir?: string;
  host?: string;
  port?: number;
}): Promise<EmbeddedDatabase> {
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  const db = await PGlite.create(opts.dataDir ?? 'memory://');
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? (await freePort(host));
  const turns = new Turns();
  const sockets = new Set<Socket>();
  /** Who listens on which channel. */
  const listeners = new Map<Socket, Set<string>>();
  const deliver = (notification: Buffer): void => {
    const channel = notificationChannel(notification);
    for (const [socket, channels] of listeners) {
      if (channels.has(channel) && socket.writable) socket.write(notification);
    }
  };
  let nextId = 1;
  let stopped = false;

  const serve = (socket: Socket): void => {
    const id = nextId++;
    sockets.add(socket);
    socket.setNoDelay(true);
    let pending: Buffer = Buffer.alloc(0);
    let started = false;
    let chain: Promise<void> = Promise.resolve();
    let open = true;

    const run = async (message: Buffer, typed: boolean, last = ''): Promise<void> => {
      if (!typed && message.readInt32BE(4) === SSL_REQUEST) {
        socket.write('N'); // no TLS on loopback
        return;
      }
      if (!typed && message.readInt32BE(4) === CANCEL_REQUEST) return; // not supported
      // A typed run is a client's batch (Parse, Bind, Describe, Execute, Sync, or a Query), passed
      // to the backend in one call; `last` is the type of its last message.
      const type = typed ? last || String.fromCharCode(message[0] ?? 0) : '';
      if (type === 'X') return; // Terminate: the socket closes next
      await turns.take(id);
      if (!open || stopped) return turns.leave(id);
      const command = typed ? listenCommand(message) : null;
      if (command) {
        const mine = listeners.get(socket) ?? new Set<string>();
        if (!command.listen) {
          if (command.channel === '*') mine.clear();
          else mine.delete(command.channel);
        } else mine.add(command.channel);
        listeners.set(socket, mine);
      }
      // The backend's output, message by message: notifications go to their listeners.
      let carry: Buffer = Buffer.alloc(0);
      await db.runExclusive(() =>
        db.execProtocolRawStream(new Uint8Array(message), {
          onRawData: (data) => {
            if (data.length === 0) return;
            const buf: Buffer =
              carry.length > 0 ? Buffer.concat([carry, Buffer.from(data)]) : Buffer.from(data);
            let at = 0;
            let plainFrom = 0;
            while (buf.length - at >= 5) {
              const len = 1 + buf.readInt32BE(at + 1);
              if (buf.length - at < len) break;
              if (buf[at] === 0x41) {
                // 'A': flush what came before it to this client, route the notification.
                if (at > plainFrom && socket.writable) socket.write(buf.subarray(plainFrom, at));
                deliver(Buffer.from(buf.subarray(at, at + len)));
                plainFrom = at + len;
              }
              at += len;
            }
            if (at > plainFrom && socket.writable) socket.write(buf.subarray(plainFrom, at));
            carry = Buffer.from(buf.subarray(at));
          },
        }),
      );
      if (carry.length > 0 && socket.writable) socket.write(carry);
      // The end of a batch gives the turn away, unless a transaction is still open.
      if ((!typed || type === 'S' || type === 'Q') && !db.isInTransaction()) turns.give(id);
    };

    socket.on('data', (data: Buffer) => {
      const split = frames(Buffer.concat([pending, data]), started);
      pending = split.rest;
      started = split.started;
      // Consecutive messages up to a Sync or a Query go to the backend together.
      let batch: Buffer[] = [];
      const flush = (last: string): void => {
        if (batch.length === 0) return;
        const message = batch.length === 1 ? (batch[0] as Buffer) : Buffer.concat(batch);
        batch = [];
        chain = chain
          .then(() => run(message, true, last))
          .catch(() => {
            socket.destroy();
          });
      };
      for (const { message, typed } of split.messages) {
        if (!typed) {
          chain = chain
            .then(() => run(message, false))
            .catch(() => {
              socket.destroy();
            });
          continue;
        }
        const t = String.fromCharCode(message[0] ?? 0);
        if (t === 'X') {
          flush('');
          continue;
        }
        batch.push(message);
        if (t === 'S' || t === 'Q') flush(t);
      }
      const unfinished = batch.at(-1);
      if (unfinished) flush(String.fromCharCode(unfinished[0] ?? 0));
    });
    const close = (): void => {
      if (!open) return;
      open = false;
      sockets.delete(socket);
      listeners.delete(socket);
      chain = chain
        .then(async () => {
          // A client gone in the middle of a transaction leaves nothing half done behind it.
          await turns.take(id);
          if (!stopped && db.isInTransaction()) await db.exec('ROLLBACK');
        })
        .catch(() => undefined)
        .finally(() => turns.leave(id));
    };
    socket.on('close', close);
    socket.on('error', close);
  };

  const server = createServer(serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    url: `postgres://postgres@${host}:${port}/postgres?sslmode=disable`,
    port,
    close: async () => {
      stopped = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      await db.close();
    },
  };
}
