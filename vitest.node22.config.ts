// The Node 22 tier (npm run test:node22): the suite's pure-logic files, the workflow replay, and a
// slice of the real stack — drift rounds, a session through the API with its trace and metrics,
// the web application in Chromium — under Node 22 LTS (the whole suite runs under Node 20).
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  test: {
    ...base.test,
    include: [
      'test/shared/**/*.test.ts',
      'test/scripts/**/*.test.ts',
      'test/activities/hcl.test.ts',
      'test/activities/offline-model.test.ts',
      'test/activities/engine-output.test.ts',
      'test/workflows/replay.test.ts',
      'test/workflows/drift-round.test.ts',
      'test/api/observability.test.ts',
      'test/web/sign-in.test.ts',
    ],
  },
});
