// Determinism: recorded histories of every workflow (test/fixtures/histories, binary protobuf written by
// `node --import tsx scripts/record-histories.ts`) replayed against the current code. A change
// that would break runs already in flight fails here. The `*-before-store` histories are runs of
// the code before the session store: they replay because that change is behind patched(); the
// negative case shows that the same change without its patch breaks them. The `*-local-events`
// histories are rounds that wrote their events through local activities (before
// ROUND_EVENTS_ACTIVITY_PATCH): they replay on the same code, which still takes that path for them.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../shared/infra/config';
import { workflowsPath } from '../../worker/worker';
import { stack } from '../support/stack';

const dir = join(projectRoot, 'test', 'fixtures', 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.binpb'));

describe('replay of recorded histories', () => {
  it('has a recorded history of each drift round mode, a session and both runner DAGs', () => {
    expect(files.sort()).toEqual([
      'drift-round-full-before-store.binpb',
      'drift-round-full-local-events.binpb',
      'drift-round-full.binpb',
      'drift-round-partial-before-store.binpb',
      'drift-round-partial-local-events.binpb',
      'drift-round-partial.binpb',
      'runner-detect.binpb',
      'runner-repair-compensated.binpb',
      'runner-repair.binpb',
      'session-before-store.binpb',
      'session.binpb',
    ]);
  });

  for (const file of files) {
    it(`replays ${file} against the current workflow code`, async () => {
      const history = temporal.api.history.v1.History.decode(readFileSync(join(dir, file)));
      expect(history.events?.length).toBeGreaterThan(10);
      await expect(
        Worker.runReplayHistory(
          { workflowBundle: { codePath: stack().workflowBundlePath } },
          history,
          `replay-${file}`,
        ),
      ).resolves.toBeUndefined();
    });
  }

  it('fails to replay a run from before the session store once the change ships without its patch', async () => {
    const unversioned = await bundleWorkflowCode({
      workflowsPath,
      logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} },
      webpackConfigHook: (config) => {
        config.resolve = {
          ...config.resolve,
          alias: {
            ...(config.resolve?.alias as Record<string, string> | undefined),
            '@temporalio/workflow$': join(projectRoot, 'test/fixtures/unversioned/workflow-sdk.ts'),
          },
        };
        return config;
      },
    });
    for (const file of ['session-before-store.binpb', 'drift-round-full-before-store.binpb']) {
      const history = temporal.api.history.v1.History.decode(readFileSync(join(dir, file)));
      await expect(
        Worker.runReplayHistory({ workflowBundle: unversioned }, history, `unversioned-${file}`),
      ).rejects.toBeInstanceOf(DeterminismViolationError);
    }
  });
});
