// Runs an external program (terraform, tofu, git) with an argument array — never a shell string —
// with a timeout, cancellation through an AbortSignal, a periodic heartbeat and bounded output.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';

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
  /** How stdout is decoded (default utf8; latin1 keeps one character per byte). */
  stdoutEncoding?: BufferEncoding;
  /** Write stdout to this file instead of memory (large outputs such as `show -json`). */
  stdoutFile?: string;
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

function bounded(max: number): { push(d: Buffer): void; text(encoding?: BufferEncoding): string } {
  const chunks: Buffer[] = [];
  let size = 0;
  let dropped = 0;
  return {
    push(d) {
      chunks.push(d);
      size += d.length;
      while (size > max && chunks.length > 1) {
        const first = chunks.shift() as Buffer;
        size -= first.length;
        dropped += first.length;
      }
    },
    text(encoding = 'utf8') {
      const body = Buffer.concat(chunks).toString(encoding);
      return dropped > 0 ? `[… ${dropped} bytes dropped …]\n${body}` : body;
    },
  };
}

/** Runs `command args…`; resolves with the result whatever the exit code, rejects on timeout,
 * cancellation or a spawn failure. */
export function runProcess(command: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const started = Date.now();
  const max = opts.maxOutputBytes ?? 8 * 1024 * 1024;
  const out = bounded(max);
  const err = bounded(max);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      detached: true, // own process group, so a kill reaches provider plugins too
    });
    let finished = false;
    let reason: 'timeout' | 'cancelled' | undefined;
    const result = (exitCode: number): RunResult => ({
      command,
      args,
      exitCode,
      stdout: out.text(opts.stdoutEncoding),
      stderr: err.text(),
      durationMs: Date.now() - started,
    });
    const killGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        /* already gone */
      }
    };
    const stop = (why: 'timeout' | 'cancelled'): void => {
      if (finished) return;
      reason = why;
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), 5000).unref();
    };
    const timer = opts.timeoutMs ? setTimeout(() => stop('timeout'), opts.timeoutMs) : undefined;
    const beat = opts.onHeartbeat
      ? setInterval(() => opts.onHeartbeat?.(Date.now() - started), opts.heartbeatMs ?? 5000)
      : undefined;
    const onAbort = (): void => stop('cancelled');
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const fileDone = new Promise<void>((res, rej) => {
      if (!opts.stdoutFile) return res();
      const sink = createWriteStream(opts.stdoutFile);
      sink.once('error', rej);
      sink.once('finish', () => res());
      child.stdout?.pipe(sink);
    });
    if (!opts.stdoutFile) child.stdout?.on('data', (d: Buffer) => out.push(d));
    child.stderr?.on('data', (d: Buffer) => err.push(d));
    if (opts.stdin !== undefined) child.stdin?.end(opts.stdin);
    const cleanup = (): void => {
      finished = true;
      if (timer) clearTimeout(timer);
      if (beat) clearInterval(beat);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    child.once('error', (e) => {
      cleanup();
      reject(new ProcessError(`cannot run ${command}: ${e.message}`, result(-1), 'spawn'));
    });
    child.once('close', (code, signal) => {
      void fileDone.then(() => settle(code, signal), reject);
    });
    const settle = (code: number | null, signal: NodeJS.Signals | null): void => {
      cleanup();
      const r = result(code ?? (signal ? 128 : -1));
      if (reason === 'timeout') {
        reject(
          new ProcessError(`${command} ${args[0] ?? ''} timed out after ${opts.timeoutMs} ms`, r, 'timeout'),
        );
      } else if (reason === 'cancelled') {
        reject(new ProcessError(`${command} ${args[0] ?? ''} was cancelled`, r, 'cancelled'));
      } else resolve(r);
    };
  });
}
