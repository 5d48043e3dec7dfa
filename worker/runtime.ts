// The worker process's Temporal runtime: the SDK's own log lines through pino (warnings up: bundle
// statistics and state changes stay out), and its Prometheus metrics (polls, task and activity
// latencies, slots, sticky cache) on observability.worker_metrics_address when one is set.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import type { Logger } from 'pino';
import { detectionTaskQueue } from '../shared/ids';

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The detection queue's worker runs activities only, by design: its start is not a warning. */
export function expectedSdkNotice(entry: { message: string; meta?: Record<string, unknown> }): boolean {
  const queue = entry.meta?.taskQueue;
  return (
    entry.message.startsWith('No workflows registered') &&
    typeof queue === 'string' &&
    queue.endsWith(detectionTaskQueue(''))
  );
}

export function installRuntime(opts: { log: Logger; level?: LogLevel; metricsAddress?: string }): void {
  const sdk = opts.log.child({ component: 'temporal-sdk' });
  Runtime.install({
    logger: new DefaultLogger(opts.level ?? 'WARN', (entry) => {
      sdk[expectedSdkNotice(entry) ? 'debug' : PINO_LEVEL[entry.level]]({ ...entry.meta }, entry.message);
    }),
    ...(opts.metricsAddress
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: opts.metricsAddress } } } }
      : {}),
  });
}
