// A worker in a process of its own, on a test stack's task queue, so that a test can kill it with
// SIGKILL (test/e2e/worker-crash.test.ts). Reads the stack from KUMOSS_TEST_STACK (JSON) and the
// task queue from KUMOSS_TEST_QUEUE, engine slots from KUMOSS_TEST_ENGINE_SLOTS (optional); prints "worker ready" once it polls.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { quietKnownWarnings } from '../../shared/logger';
import { startStackWorker, type TestStack } from './test-stack';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
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
