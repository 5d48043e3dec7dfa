// A worker in a process of its own, on a test stack's task queue, so that a test can kill it with
// SIGKILL (test/e2e/worker-crash.test.ts). Reads the stack from KUMOSS_TEST_STACK (JSON) and the
// task queue from KUMOSS_TEST_QUEUE, engine slots from KUMOSS_TEST_ENGINE_SLOTS (optional), the SDK's
// metrics address from KUMOSS_WORKER_METRICS_ADDRESS (optional); prints "worker ready" once it polls.
import { logger, quietKnownWarnings } from '../../shared/infra/logger';
import { installRuntime } from '../../worker/runtime';
import { startStackWorker, type TestStack } from './test-stack';

quietKnownWarnings();
// As the worker process does; the SDK's Prometheus metrics when KUMOSS_WORKER_METRICS_ADDRESS is set.
installRuntime({
  log: logger,
  level: 'ERROR',
  ...(process.env.KUMOSS_WORKER_METRICS_ADDRESS
    ? { metricsAddress: process.env.KUMOSS_WORKER_METRICS_ADDRESS }
    : {}),
});
const stack = JSON.parse(process.env.KUMOSS_TEST_STACK ?? '{}') as TestStack;
const queue = process.env.KUMOSS_TEST_QUEUE ?? '';
const slots = process.env.KUMOSS_TEST_ENGINE_SLOTS;
const worker = await startStackWorker(
  stack,
  queue,
  slots !== undefined ? { engineSlots: Number(slots) } : {},
);
process.stdout.write('worker ready\n');
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => void worker.stop().then(() => process.exit(0)));
