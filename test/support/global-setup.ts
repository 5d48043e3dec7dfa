// One real stack per test run (test/support/test-stack.ts), handed to the test files; each file
// connects with its own task queue (test/support/stack.ts).
import type { TestProject } from 'vitest/node';
import { newSecretsKey } from '../../shared/infra/secret-box';
import { SECRET_MARKER, scanForSecrets } from './secret-scan';
import { startTestStack, type TestStack } from './test-stack';
import { ensureWebBuild } from '../../scripts/web-build';

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
  // One KUMOSS_SECRETS_KEY for the run (the test files' processes inherit it): the closing scan
  // looks for it too.
  process.env.KUMOSS_SECRETS_KEY ||= newSecretsKey();
  const secretsKey = process.env.KUMOSS_SECRETS_KEY;
  // The web application is built once here (when its sources changed), beside the stack: the
  // browser tests and the launcher's test then find it built instead of each building it at once.
  const [{ stack, stop }] = await Promise.all([startTestStack(shape), ensureWebBuild()]);
  console.log(
    `[test stack] up in ${((Date.now() - t0) / 1000).toFixed(1)}s: Temporal ${stack.temporalAddress}` +
      (stack.cluster ? ` (a cluster: ${Object.keys(stack.cluster.pids).join(', ')} on PostgreSQL)` : ''),
  );
  project.provide('stack', stack);
  // After every test file: no test secret in any workflow history or artifact the whole run
  // produced, saved plans opened. Every secret a test makes up carries SECRET_MARKER, and so do the
  // object store's secret key the workers hold and the engine's own cloud secret
  // (test/support/test-stack.ts); the run's KUMOSS_SECRETS_KEY is looked for as it is. A finding
  // fails the run.
  // Vitest only logs what a teardown throws: a finding, or a scan that could not read everything,
  // sets the exit code itself so that the run fails.
  return async () => {
    try {
      const { findings, histories, objects, archives } = await scanForSecrets(stack, {
        'a test secret': SECRET_MARKER,
        'the secrets key (KUMOSS_SECRETS_KEY)': secretsKey,
      });
      console.log(
        `[secret scan] ${histories} workflow histories and ${objects} artifacts (${archives} saved plans opened): ${findings.length} finding(s)`,
      );
      if (findings.length) {
        throw new Error(`secrets leaked: ${findings.map((f) => `${f.secret} in ${f.where}`).join('; ')}`);
      }
    } catch (err) {
      process.exitCode = 1;
      throw err;
    } finally {
      await stop();
    }
  };
}
