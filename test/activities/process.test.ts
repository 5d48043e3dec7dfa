// External programs run through the worker's spawner (activities/spawner.mjs): output, exit
// codes, stdin, a file for stdout, niceness, timeouts and cancellation that reach the whole process
// group — and never a fork of the calling process, whose event loop a fork of its memory would stop.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ProcessError, runProcess } from '../../activities/process';

/** Running: listed and not a zombie (a killed orphan waits for whoever reaps it). */
const alive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
};

describe('runProcess', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-process-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('returns output and exit code, feeds stdin, writes stdout to a file', async () => {
    const r = await runProcess('sh', ['-c', 'cat; echo oops >&2; exit 3'], { stdin: 'hello' });
    expect(r).toMatchObject({ exitCode: 3, stdout: 'hello', stderr: 'oops\n' });
    const file = join(dir, 'out.txt');
    const f = await runProcess('sh', ['-c', 'echo to-file'], { stdoutFile: file });
    expect(f.stdout).toBe('');
    expect(readFileSync(file, 'utf8')).toBe('to-file\n');
  });

  it('keeps only the tail of an output over the bound, saying how much it dropped', async () => {
    const r = await runProcess('sh', ['-c', 'head -c 300000 /dev/zero | tr "\\0" a; echo END'], {
      maxOutputBytes: 100_000,
    });
    expect(r.stdout).toMatch(/^\[… \d+ bytes dropped …\]\n/);
    expect(r.stdout.endsWith('aEND\n')).toBe(true);
    expect(r.stdout.length).toBeLessThan(200_000);
  });

  it('starts the program from its spawner, not by forking this process', async () => {
    const r = await runProcess('sh', ['-c', 'echo $PPID']);
    const parent = Number(r.stdout.trim());
    expect(parent).toBeGreaterThan(1);
    expect(parent).not.toBe(process.pid);
    // The spawner is this process's child.
    expect(readFileSync(`/proc/${parent}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]).toBe(
      String(process.pid),
    );
  });

  it('runs at the niceness asked for, and so does what the program starts', async () => {
    const r = await runProcess('sh', ['-c', 'nice; sh -c nice'], { niceness: 10 });
    expect(r.stdout.trim().split('\n')).toEqual(['10', '10']);
    expect((await runProcess('nice', [])).stdout.trim()).toBe('0');
  });

  it('a timeout or a cancellation kills the whole process group', async () => {
    const pidFile = join(dir, 'grandchild.pid');
    const started = runProcess('sh', ['-c', `sleep 60 & echo $! > ${pidFile}; wait`], { timeoutMs: 500 });
    await expect(started).rejects.toMatchObject({ reason: 'timeout' });
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    await expect.poll(() => alive(grandchild)).toBe(false);

    // Cancelled once the program is running (it has written its pid).
    const runningFile = join(dir, 'cancelled.pid');
    const abort = new AbortController();
    const cancelled = runProcess('sh', ['-c', `echo $$ > ${runningFile}; exec sleep 60`], {
      signal: abort.signal,
    });
    await expect.poll(() => readFileSync(runningFile, { encoding: 'utf8', flag: 'a+' }).trim()).not.toBe('');
    abort.abort();
    await expect(cancelled).rejects.toBeInstanceOf(ProcessError);
    await expect(cancelled).rejects.toMatchObject({ reason: 'cancelled' });
    await expect.poll(() => alive(Number(readFileSync(runningFile, 'utf8')))).toBe(false);
  });

  it('a program that cannot start is a spawn failure', async () => {
    await expect(runProcess('/nonexistent/kumoss-tool', [])).rejects.toMatchObject({ reason: 'spawn' });
  });

  it('a spawner that dies fails the runs it held; the next run gets a new one', async () => {
    const ppid = Number((await runProcess('sh', ['-c', 'echo $PPID'])).stdout.trim());
    const held = runProcess('sleep', ['60']);
    process.kill(ppid, 'SIGKILL');
    await expect(held).rejects.toMatchObject({ reason: 'spawn' });
    const next = Number((await runProcess('sh', ['-c', 'echo $PPID'])).stdout.trim());
    expect(next).not.toBe(ppid);
  });

  it('a caller killed outright leaves no program running', async () => {
    const pidFile = join(dir, 'orphan.pid');
    const caller = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import('./activities/process.ts').then(({ runProcess }) => runProcess('sh', ['-c', 'echo $$ > ${pidFile}; exec sleep 60']))`,
      ],
      { stdio: 'ignore' },
    );
    await expect
      .poll(() => readFileSync(pidFile, { encoding: 'utf8', flag: 'a+' }).trim(), { timeout: 15_000 })
      .not.toBe('');
    const program = Number(readFileSync(pidFile, 'utf8'));
    expect(alive(program)).toBe(true);
    caller.kill('SIGKILL');
    await expect.poll(() => alive(program), { timeout: 10_000 }).toBe(false);
  });
});
