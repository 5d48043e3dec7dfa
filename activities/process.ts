// Runs an external program (terraform, tofu, git) with an argument array — never a shell string —
// with a timeout, cancellation through an AbortSignal, a periodic heartbeat and bounded output.
// The process is started by this process's spawner (activities/spawner.mjs), not by this process:
// a fork here would stop this event loop for a time that grows with its memory.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called every `heartbeatMs` while the process runs (activity heartbeats). */
  onHeartbeat?: (elapsedMs: number) => void;
  heartbeatMs?: number;
  /** Output beyond this many bytes per stream is dropped from memory (the tail is kept). */
  maxOutputBytes?: number;
  stdin?: string;
  /**
   * A text written to the program's descriptor 3 (a pipe): bubblewrap reads its arguments there
   * (`--args 3`), where no other process of the machine can read them.
   */
  fd3?: string;
  /** How stdout is decoded (default utf8; latin1 keeps one character per byte). */
  stdoutEncoding?: BufferEncoding;
  /** Write stdout to this file instead of memory (large outputs such as `show -json`). */
  stdoutFile?: string;
  /**
   * Run it (and every process it starts) at this niceness, through coreutils' `nice`: bulk work
   * such as an engine's plan yields the cores to the control plane that shares them.
   */
  niceness?: number;
}

export interface RunResult {
  command: string;
  args: string[];
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export class ProcessError extends Error {
  override name = 'ProcessError';
  constructor(
    message: string,
    readonly result: RunResult,
    readonly reason: 'exit' | 'timeout' | 'cancelled' | 'spawn',
  ) {
    super(message);
  }
}

interface SpawnerAnswer {
  id: number;
  error?: string;
  code?: number | null;
  signal?: NodeJS.Signals | null;
  stdout?: Uint8Array;
  stderr?: Uint8Array;
  droppedOut?: number;
  droppedErr?: number;
}

/**
 * The one spawner of this process (activities/spawner.mjs): forked once, while the process is still
 * small, and again only if it dies. Its channel holds this process open only while a run is going.
 */
class Spawner {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (a: SpawnerAnswer) => void>();
  private nextId = 1;
  dead = false;

  constructor() {
    this.child = fork(fileURLToPath(new URL('./spawner.mjs', import.meta.url)), [], {
      execArgv: [],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (a: SpawnerAnswer) => {
      const settle = this.pending.get(a.id);
      this.pending.delete(a.id);
      this.idle();
      settle?.(a);
    });
    const gone = (why: string): void => {
      if (this.dead) return;
      this.dead = true;
      for (const [id, settle] of this.pending) settle({ id, error: `the process spawner ${why}` });
      this.pending.clear();
    };
    this.child.once('exit', (code, signal) => gone(`exited (${signal ?? code})`));
    this.child.once('error', (e) => gone(`failed: ${e.message}`));
    this.idle();
  }

  run(request: Record<string, unknown>): { id: number; answer: Promise<SpawnerAnswer> } {
    const id = this.nextId++;
    const answer = new Promise<SpawnerAnswer>((resolve) => {
      this.pending.set(id, resolve);
      this.child.ref();
      (this.child.channel as { ref?: () => void } | undefined)?.ref?.();
      this.child.send({ id, ...request }, (err) => {
        if (!err || !this.pending.has(id)) return;
        this.pending.delete(id);
        resolve({ id, error: `the process spawner is unreachable: ${err.message}` });
      });
    });
    return { id, answer };
  }

  kill(id: number, signal: NodeJS.Signals): void {
    if (!this.dead && this.child.connected) this.child.send({ kill: id, signal }, () => undefined);
  }

  private idle(): void {
    if (this.pending.size > 0) return;
    this.child.unref();
    (this.child.channel as { unref?: () => void } | undefined)?.unref?.();
  }
}

let spawner: Spawner | undefined;

/** Starts this process's spawner now (the worker does, first thing, while it is small). */
export function startSpawner(): void {
  if (!spawner || spawner.dead) spawner = new Spawner();
}

function text(bytes: Uint8Array | undefined, dropped: number | undefined, encoding: BufferEncoding): string {
  const body = Buffer.from(bytes ?? new Uint8Array()).toString(encoding);
  return dropped ? `[… ${dropped} bytes dropped …]\n${body}` : body;
}

/** Runs `command args…`; resolves with the result whatever the exit code, rejects on timeout,
 * cancellation or a spawn failure. */
export function runProcess(command: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const started = Date.now();
  const max = opts.maxOutputBytes ?? 8 * 1024 * 1024;
  startSpawner();
  const sp = spawner as Spawner;
  const { id, answer } = sp.run({
    command,
    args,
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdin: opts.stdin,
    fd3: opts.fd3,
    stdoutFile: opts.stdoutFile,
    maxOutputBytes: max,
    niceness: opts.niceness,
  });
  let reason: 'timeout' | 'cancelled' | undefined;
  let finished = false;
  const stop = (why: 'timeout' | 'cancelled'): void => {
    if (finished) return;
    reason = why;
    sp.kill(id, 'SIGTERM');
    setTimeout(() => {
      if (!finished) sp.kill(id, 'SIGKILL');
    }, 5000).unref();
  };
  const timer = opts.timeoutMs ? setTimeout(() => stop('timeout'), opts.timeoutMs) : undefined;
  const beat = opts.onHeartbeat
    ? setInterval(() => opts.onHeartbeat?.(Date.now() - started), opts.heartbeatMs ?? 5000)
    : undefined;
  const onAbort = (): void => stop('cancelled');
  if (opts.signal?.aborted) onAbort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  return answer.then((a) => {
    finished = true;
    if (timer) clearTimeout(timer);
    if (beat) clearInterval(beat);
    opts.signal?.removeEventListener('abort', onAbort);
    const r: RunResult = {
      command,
      args,
      exitCode: a.error !== undefined ? -1 : (a.code ?? (a.signal ? 128 : -1)),
      stdout: text(a.stdout, a.droppedOut, opts.stdoutEncoding ?? 'utf8'),
      stderr: text(a.stderr, a.droppedErr, 'utf8'),
      durationMs: Date.now() - started,
    };
    if (a.error !== undefined) throw new ProcessError(`cannot run ${command}: ${a.error}`, r, 'spawn');
    if (reason === 'timeout')
      throw new ProcessError(
        `${command} ${args[0] ?? ''} timed out after ${opts.timeoutMs} ms`,
        r,
        'timeout',
      );
    if (reason === 'cancelled')
      throw new ProcessError(`${command} ${args[0] ?? ''} was cancelled`, r, 'cancelled');
    return r;
  });
}
