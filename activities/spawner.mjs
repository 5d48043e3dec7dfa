// The worker's spawner: a small process that starts the worker's external programs (engine, git)
// on its behalf. Starting a process forks its parent, and a fork costs in proportion to the
// parent's memory: ~1 ms from this process, ~30 ms from a 500 MB worker, ~90 ms from a 2 GB one —
// milliseconds in which the worker's event loop (workflow tasks, heartbeats, status writes) stands
// still (docs/benchmarks.md, the SSE delay by segment). Plain JavaScript, no loader: it stays small.
//
// Messages from the worker (activities/process.ts): a run request
//   {id, command, args, cwd, env, stdin?, fd3?, stdoutFile?, maxOutputBytes, niceness?}
// (fd3: a text written to the program's descriptor 3, a pipe — bubblewrap's `--args 3`);
// answered once with {id, code, signal, stdout, stderr, droppedOut, droppedErr} or {id, error};
// and {kill: id, signal}, which signals the run's whole process group. When the worker goes away
// (its channel closes, even on SIGKILL), every run still going is killed and the spawner exits.
import { spawn } from 'node:child_process';
import { createWriteStream, rmSync } from 'node:fs';

/** @type {Map<number, import('node:child_process').ChildProcess>} */
const running = new Map();

/**
 * @typedef {{ id: number, command: string, args: string[], cwd?: string, env?: NodeJS.ProcessEnv,
 *   stdin?: string, fd3?: string, stdoutFile?: string, maxOutputBytes: number, niceness?: number }} RunRequest
 * @typedef {{ kill: number, signal: NodeJS.Signals }} KillRequest
 */

/**
 * Keeps at most `max` bytes (the tail), counting what it dropped.
 * @param {number} max
 */
function bounded(max) {
  /** @type {Buffer[]} */
  const chunks = [];
  let size = 0;
  let dropped = 0;
  return {
    /** @param {Buffer} d */
    push(d) {
      chunks.push(d);
      size += d.length;
      while (size > max && chunks.length > 1) {
        const first = /** @type {Buffer} */ (chunks.shift());
        size -= first.length;
        dropped += first.length;
      }
    },
    take: () => ({ bytes: Buffer.concat(chunks), dropped }),
  };
}

/**
 * @param {import('node:child_process').ChildProcess} child
 * @param {NodeJS.Signals} signal
 */
const killGroup = (child, signal) => {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* already gone */
  }
};

/** @param {Record<string, unknown>} m */
const reply = (m) => {
  if (process.connected) process.send?.(m);
};

process.on('message', (/** @type {RunRequest | KillRequest} */ message) => {
  if ('kill' in message) {
    const m = message;
    const child = running.get(m.kill);
    if (child) killGroup(child, m.signal);
    return;
  }
  const m = message;
  const { id } = m;
  let answered = false;
  /** @param {Record<string, unknown>} a */
  const answer = (a) => {
    if (answered) return;
    answered = true;
    running.delete(id);
    reply({ id, ...a });
  };
  /** @type {import('node:child_process').ChildProcess} */
  let child;
  try {
    // At a niceness, through coreutils' `nice`: the run and every process it starts yield the cores.
    const [file, argv] = m.niceness
      ? ['nice', ['-n', String(m.niceness), m.command, ...m.args]]
      : [m.command, m.args];
    /** @type {'ignore' | 'pipe'} */
    const stdin = m.stdin === undefined ? 'ignore' : 'pipe';
    child = spawn(file, argv, {
      cwd: m.cwd,
      env: m.env,
      stdio: m.fd3 === undefined ? [stdin, 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe', 'pipe'],
      detached: true, // own process group, so a kill reaches provider plugins too
    });
  } catch (e) {
    answer({ error: /** @type {Error} */ (e).message });
    return;
  }
  running.set(id, child);
  const out = bounded(m.maxOutputBytes);
  const err = bounded(m.maxOutputBytes);
  const fileDone = new Promise((resolve, reject) => {
    if (!m.stdoutFile) return resolve(undefined);
    // A new file, never one that is there: a name the engine could have made a symbolic link in a
    // directory it writes would otherwise send the output wherever the link points.
    rmSync(m.stdoutFile, { force: true });
    const sink = createWriteStream(m.stdoutFile, { flags: 'wx' });
    sink.once('error', reject);
    sink.once('finish', () => resolve(undefined));
    child.stdout?.pipe(sink);
  });
  if (!m.stdoutFile) child.stdout?.on('data', (d) => out.push(d));
  child.stderr?.on('data', (d) => err.push(d));
  if (m.stdin !== undefined) child.stdin?.end(m.stdin);
  if (m.fd3 !== undefined) {
    const fd3 = /** @type {import('node:stream').Writable} */ (child.stdio[3]);
    fd3.on('error', () => undefined); // a program that exits before reading it: its exit says why
    fd3.end(m.fd3);
  }
  child.once('error', (e) => answer({ error: e.message }));
  child.once('close', (code, signal) => {
    fileDone.then(
      () => {
        const o = out.take();
        const e = err.take();
        answer({
          code,
          signal,
          stdout: o.bytes,
          stderr: e.bytes,
          droppedOut: o.dropped,
          droppedErr: e.dropped,
        });
      },
      (/** @type {Error} */ e) => answer({ error: `writing ${m.stdoutFile}: ${e.message}` }),
    );
  });
});

process.on('disconnect', () => {
  for (const child of running.values()) killGroup(child, 'SIGKILL');
  process.exit(0);
});
