import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Native addons (Temporal's core bridge) misbehave in worker threads.
    pool: 'forks',
    globalSetup: ['test/support/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    // The cluster tier's own file runs on the cluster stack only (vitest.cluster.config.ts).
    exclude: ['**/node_modules/**', 'test/cluster/**'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    // Global teardown scans every history and artifact of the run for test secrets.
    teardownTimeout: 180_000,
    fileParallelism: true,
    maxWorkers: 3,
  },
});
