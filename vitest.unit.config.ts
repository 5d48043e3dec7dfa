import { defineConfig } from 'vitest/config';

// The fast tier: pure logic, and workflows on TestWorkflowEnvironment (a local server from setup's
// own Temporal CLI) with stub activities — no engine, no store, no global setup. `npm run
// test:unit`; the full suite (`npm test`) runs these files too.
export default defineConfig({
  test: {
    // Temporal's core bridge misbehaves in worker threads.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    include: [
      'test/shared/drift.test.ts',
      'test/shared/drift-exceptions.test.ts',
      'test/shared/drift-report.test.ts',
      'test/shared/runner-plan.test.ts',
      'test/shared/ids.test.ts',
      'test/shared/audit-events.test.ts',
      'test/shared/layers.test.ts',
      'test/api/contract.test.ts',
      'test/workflows/detect-and-remediate-loop.test.ts',
      'test/workflows/session-handlers.test.ts',
      'test/activities/drift-round-input.test.ts',
      'test/activities/hcl.test.ts',
      'test/activities/hcl-edit.test.ts',
      'test/activities/offline-generate.test.ts',
      'test/activities/plan-reader.test.ts',
      'test/activities/process.test.ts',
      'test/worker/detections.test.ts',
    ],
  },
});
