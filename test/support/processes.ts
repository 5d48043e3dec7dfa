// Kumoss's own processes beside a test, so that a test can kill one with SIGKILL: a worker
// (test/support/worker-process.ts, the real activities on the run's stack) and the real API process
// (api/main.ts, configured by environment variables, as in production).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../shared/config';
import { freePort } from '../../scripts/embedded/ports';
import { stack } from './stack';

/** A worker process on `queue`; resolves once it polls. */
export async function workerProcess(queue: string, env: NodeJS.ProcessEnv = {}): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(projectRoot, 'test/support/worker-process.ts')],
    {
      cwd: projectRoot,
      env: { ...process.env, ...env, KUMOSS_TEST_STACK: JSON.stringify(stack()), KUMOSS_TEST_QUEUE: queue },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('worker ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker process exited with ${code}`)));
  });
  return child;
}

export interface ApiProcess {
  url: string;
  child: ChildProcess;
}

/** The API process on the run's stack, starting sessions on `queue`; resolves once it answers. */
export async function apiProcess(queue: string, env: NodeJS.ProcessEnv = {}): Promise<ApiProcess> {
  const s = stack();
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', join(projectRoot, 'api/main.ts')], {
    cwd: projectRoot,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      KUMOSS_DATA_DIR: mkdtempSync(join(tmpdir(), 'kumoss-api-')),
      DATABASE_URL: s.databaseUrl,
      TEMPORAL_ADDRESS: s.temporalAddress,
      TEMPORAL_NAMESPACE: s.namespace,
      KUMOSS_TASK_QUEUE: queue,
      S3_ENDPOINT: s.s3Endpoint,
      S3_BUCKET: s.bucket,
      KUMOSS_API_HOST: '127.0.0.1',
      KUMOSS_API_PORT: String(port),
      KUMOSS_LOG_LEVEL: 'warn',
      ...env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) => reject(new Error(`API process exited: ${code ?? signal}`))),
  );
  exited.catch(() => undefined);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await Promise.race([
      fetch(`${url}/health`).then(
        () => true,
        () => false,
      ),
      exited,
    ]);
    if (up) return { url, child };
    if (Date.now() > deadline) throw new Error('the API process did not answer within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Kills a process with SIGKILL and waits until it is gone. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}
