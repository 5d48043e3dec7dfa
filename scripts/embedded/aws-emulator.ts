// moto_server (PyPI moto, installed by setup) on loopback: the AWS APIs the runner DAG talks to
// (ECS, CloudWatch Logs, Secrets Manager) for `npm start` and the tests. Real AWS SDK v3 clients
// talk to it; only the endpoint differs.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pyToolPath } from '../../shared/infra/tools.mjs';
import { freePort } from './ports';

export interface AwsEmulator {
  endpoint: string;
  /**
   * The requests moto recorded: the action (X-Amz-Target, e.g. AmazonEC2ContainerServiceV20141113.CreateCluster),
   * and the access key id and region of the signature's credential scope.
   */
  recordedRequests(): Promise<{ action: string; accessKeyId: string; region: string }[]>;
  pid: number;
  stop(): Promise<void>;
}

export async function startAwsEmulator(
  opts: {
    port?: number;
    host?: string;
    /** moto's request recorder (tests read it) */ record?: boolean;
  } = {},
): Promise<AwsEmulator> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port || (await freePort(host));
  // moto writes its recording to ./moto_recording unless told otherwise: keep it out of the clone.
  const recording = join(mkdtempSync(join(tmpdir(), 'kumoss-moto-')), 'recording.jsonl');
  const child = spawn(pyToolPath('moto'), ['-H', host, '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...process.env,
      PYTHONUNBUFFERED: '1',
      ...(opts.record ? { MOTO_ENABLE_RECORDING: 'True', MOTO_RECORDER_FILEPATH: recording } : {}),
    },
  });
  let output = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (output.length < 20000) output += d.toString();
  });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const endpoint = `http://${host}:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('wait'), 200))]);
    if (early !== 'wait')
      throw new Error(`moto_server exited with code ${String(early)}:\n${output.slice(-4000)}`);
    try {
      const res = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(1000) });
      if (res.ok || res.status < 500) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto_server at ${endpoint} not ready in time:\n${output.slice(-4000)}`);
    }
  }
  if (opts.record) await fetch(`${endpoint}/moto-api/recorder/start-recording`, { method: 'POST' });
  return {
    endpoint,
    pid: child.pid ?? 0,
    async recordedRequests() {
      const text = await (await fetch(`${endpoint}/moto-api/recorder/download-recording`)).text();
      return text
        .split('\n')
        .filter((line) => line.trim())
        .map((line) => {
          const headers = (JSON.parse(line) as { headers?: Record<string, string> }).headers ?? {};
          const auth = headers.Authorization ?? headers.authorization ?? '';
          const scope = /Credential=([^/]+)\/\d+\/([^/]+)\//.exec(auth);
          return {
            action: headers['X-Amz-Target'] ?? headers['x-amz-target'] ?? '',
            accessKeyId: scope?.[1] ?? '',
            region: scope?.[2] ?? '',
          };
        });
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      rmSync(dirname(recording), { recursive: true, force: true });
    },
  };
}
