// Builds a worker from its parts; main.ts wires the real clients, tests wire theirs.
import { fileURLToPath } from 'node:url';
import type { NativeConnection } from '@temporalio/worker';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import type { Activities } from '../activities';
import { autoHeartbeat } from './heartbeat';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests build one per run); default: bundle workflows/ at start. */
  workflowBundlePath?: string;
  identity?: string;
  /** Payload codecs (encryption): shared/payload-codec.ts. */
  dataConverter?: WorkerOptions['dataConverter'];
}

export async function createWorker(opts: CreateWorkerOptions): Promise<Worker> {
  const options: WorkerOptions = {
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: opts.activities,
    interceptors: { activity: [autoHeartbeat] },
    ...(opts.identity ? { identity: opts.identity } : {}),
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    ...(opts.workflowBundlePath
      ? { workflowBundle: { codePath: opts.workflowBundlePath } }
      : { workflowsPath }),
  };
  return Worker.create(options);
}
