// One real stack per test run (test/support/test-stack.ts), handed to the test files; each file
// connects with its own task queue (test/support/stack.ts).
import type { TestProject } from 'vitest/node';
import { SECRET_MARKER, scanForSecrets } from './secret-scan';
import { startTestStack, type TestStack } from './test-stack';

export type { TestStack };

declare module 'vitest' {
  export interface ProvidedContext {
    stack: TestStack;
  }
}

/** The stack's shape: `KUMOSS_TEST_STACK_SHAPE=cluster` (npm run test:cluster), else the dev server. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const shape = process.env.KUMOSS_TEST_STACK_SHAPE === 'cluster' ? 'cluster' : 'dev';
  const { stack, stop } = await startTestStack(shape);
  console.log(
    `[test stack] up in ${((Date.now() - t0) / 1000).toFixed(1)}s: Temporal ${stack.temporalAddress}` +
      (stack.cluster ? ` (a cluster: ${Object.keys(stack.cluster.pids).join(', ')} on PostgreSQL)` : ''),
  );
  project.provide('stack', stack);
  // After every test file: no test secret (they all carry SECRET_MARKER) in any workflow history
  // or artifact the whole run produced. A finding fails the run.
  return async () => {
    const { findings, histories, objects } = await scanForSecrets(stack, { 'a test secret': SECRET_MARKER });
    await stop();
    console.log(
      `[secret scan] ${histories} workflow histories and ${objects} artifacts: ${findings.length} finding(s)`,
    );
    if (findings.length) {
      throw new Error(`secrets leaked: ${findings.map((f) => `${f.secret} in ${f.where}`).join('; ')}`);
    }
  };
}
