// Builds a worker from its parts; main.ts wires the real clients, tests wire theirs.
import { availableParallelism, hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { detectionTaskQueue } from '../shared/ids';
import { SANDBOX_IDENTITY_KEY } from '../shared/worker-identity';
import type { NativeConnection, State } from '@temporalio/worker';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from '../shared/infra/tracing';
import type { Activities } from '../activities';
import { autoHeartbeat, HEARTBEAT_EVERY_MS } from './heartbeat';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests build one per run); default: bundle workflows/ at start. */
  workflowBundlePath?: string;
  identity?: string;
  /** Payload codecs (encryption): shared/infra/payload-codec.ts. */
  dataConverter?: WorkerOptions['dataConverter'];
  /**
   * Traces (shared/infra/tracing.ts): workflow, activity and client-call spans joined to the caller's
   * trace. Its workflow interceptors are bundled in, so a traced worker bundles workflows/ itself
   * (a prebuilt bundle without them is refused).
   */
  tracing?: Tracing;
  /**
   * How many stack detections this worker runs at once (the detection queue's activity slots);
   * default: {@link detectionsFor} the machine's cores.
   */
  detections?: number;
}

/**
 * Stack detections a worker runs at once: `engine.max_concurrent_detections` when set, else twice
 * its engine slots (`engine.max_concurrent`, 0 = its cores) — the slots bound the engine processes
 * among them, and the others meanwhile fetch, read plans and upload.
 */
export function detectionsFor(engineSlots: number, configured = 0): number {
  if (configured > 0) return configured;
  return 2 * (engineSlots > 0 ? engineSlots : availableParallelism());
}

/**
 * A Kumoss worker: the task queue's workflows and activities, and beside them the detection
 * queue's (shared/ids.ts `detectionTaskQueue`), polled for at most `detections` at once. Both run
 * and stop together.
 */
export interface KumossWorker {
  run(): Promise<void>;
  shutdown(): void;
  /** The task queue worker's state; STOPPED once both have stopped. */
  getState(): State;
}

/**
 * The worker's identity as the task queue's pollers show it: `pid@host` (the SDK's default) and
 * the engine sandbox's state, which the API's /health reports (shared/worker-identity.ts).
 */
export function workerIdentity(sandbox: string): string {
  return `${process.pid}@${hostname()} ${SANDBOX_IDENTITY_KEY}=${sandbox}`;
}

export async function createWorker(opts: CreateWorkerOptions): Promise<KumossWorker> {
  if (opts.tracing && opts.workflowBundlePath)
    throw new Error(
      'a traced worker bundles its workflows itself: give tracing or workflowBundlePath, not both',
    );
  const options: WorkerOptions = {
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: opts.activities,
    interceptors: { activity: [autoHeartbeat] },
    // Each heartbeat reaches the server as it is made (the SDK would hold them for up to 80 % of
    // the heartbeat timeout): a short timeout still has most of its length as margin.
    maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
    ...(opts.identity ? { identity: opts.identity } : {}),
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    ...(opts.workflowBundlePath
      ? { workflowBundle: { codePath: opts.workflowBundlePath } }
      : { workflowsPath }),
    ...(opts.tracing
      ? {
          plugins: [
            new OpenTelemetryPlugin({
              resource: opts.tracing.resource,
              spanProcessor: opts.tracing.spanProcessor,
            }),
          ],
        }
      : {}),
  };
  const main = await Worker.create(options);
  const detections = opts.detections ?? detectionsFor(0);
  const { workflowsPath: _w, workflowBundle: _b, ...activityOptions } = options;
  const lane = await Worker.create({
    ...activityOptions,
    taskQueue: detectionTaskQueue(opts.taskQueue),
    maxConcurrentActivityTaskExecutions: detections,
    // Polls for no more than it can start: a task it holds unstarted is one another worker could run.
    maxConcurrentActivityTaskPolls: 1,
  });
  const both = [main, lane];
  return {
    async run() {
      // One stopping (shutdown, or a fatal error) stops the other; the first error is the answer.
      const runs = both.map((w) =>
        w.run().catch((err: unknown) => {
          for (const o of both) if (o.getState() === 'RUNNING') o.shutdown();
          throw err;
        }),
      );
      const settled = await Promise.allSettled(runs);
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
    },
    shutdown() {
      for (const w of both) if (w.getState() === 'RUNNING') w.shutdown();
    },
    getState() {
      const state = main.getState();
      return state === 'STOPPED' && lane.getState() !== 'STOPPED' ? 'STOPPING' : state;
    },
  };
}
