// Kumoss's own processes beside a test, so that a test can kill one with SIGKILL: a worker
// (test/support/worker-process.ts, the real activities on the run's stack) and the real API process
// (api/main.ts, configured by environment variables, as in production).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../shared/infra/config';
import { vi } from 'vitest';
import { freePort } from '../../scripts/embedded/ports';
import { stack } from './stack';
import { testEgressFile } from './test-cloud';

/** A worker process on `queue`; resolves once it polls. */
export async function workerProcess(queue: string, env: NodeJS.ProcessEnv = {}): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(projectRoot, 'test/support/worker-process.ts')],
    {
      cwd: projectRoot,
      env: {
        ...process.env,
        ...env,
        KUMOSS_TEST_STACK: JSON.stringify(stack()),
        KUMOSS_TEST_QUEUE: queue,
        // The test cloud's APIs, made before or after it starts, as its engine.egress_allow.
        KUMOSS_TEST_EGRESS_FILE: testEgressFile(),
      },
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
      // The run's git host is this API's git host (its repositories are on loopback, allowed as such).
      KUMOSS_GIT_HOST_PORT: new URL(s.gitHostUrl).port,
      KUMOSS_API_HOST: '127.0.0.1',
      KUMOSS_API_PORT: String(port),
      KUMOSS_LOG_LEVEL: 'warn',
      ...env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  let exited = '';
  child.once('exit', (code, signal) => (exited = `API process exited: ${code ?? signal}`));
  // Up once /health answers at all (its components may still be coming up); an exit ends the wait.
  await vi.waitFor(
    async () => {
      if (exited) return;
      await fetch(`${url}/health`);
    },
    { timeout: 60_000, interval: 100 },
  );
  if (exited) throw new Error(exited);
  return { url, child };
}

/** Kills a process with SIGKILL and waits until it is gone. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}
