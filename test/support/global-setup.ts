// One real stack per test run (test/support/test-stack.ts), handed to the test files; each file
// connects with its own task queue (test/support/stack.ts).
import type { TestProject } from 'vitest/node';
import { startTestStack, type TestStack } from './test-stack';

export type { TestStack };

declare module 'vitest' {
  export interface ProvidedContext {
    stack: TestStack;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const { stack, stop } = await startTestStack();
  console.log(
    `[test stack] up in ${((Date.now() - t0) / 1000).toFixed(1)}s: Temporal ${stack.temporalAddress}`,
  );
  project.provide('stack', stack);
  return stop;
}
