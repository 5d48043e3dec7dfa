// The cluster tier (npm run test:cluster): the same global setup with KUMOSS_TEST_STACK_SHAPE=cluster
// — Temporal's four services on PostgreSQL, Kumoss's metadata on that PostgreSQL — and the files
// that prove Kumoss on it: the cluster's shape, drift rounds, a session's pull request and merge,
// events pushed through PostgreSQL's LISTEN/NOTIFY, and both runner DAGs.
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

process.env.KUMOSS_TEST_STACK_SHAPE = 'cluster';

export default defineConfig({
  test: {
    ...base.test,
    include: [
      'test/cluster/**/*.test.ts',
      'test/workflows/drift-round.test.ts',
      'test/api/pull-requests.test.ts',
      'test/api/events.test.ts',
      'test/workflows/runner-environment-drift.test.ts',
    ],
    exclude: ['**/node_modules/**'],
    // One file at a time: the scale-out file alone puts three workers, two API processes and 30
    // rounds on the two cores beside the cluster's four services; with other files beside it,
    // requests missed their 10 s Temporal deadline (503) and activities timed out into retries.
    maxWorkers: 1,
  },
});
