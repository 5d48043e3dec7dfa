// Determinism: recorded histories of every workflow (test/fixtures/histories, binary protobuf written by
// `npm run record-histories`) replayed against the current code. A change that would break runs
// already in flight fails here; the negative case shows it does, with an activity renamed.
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
  // stack-detection.binpb was recorded before its stack read and inbox record became local
  // activities: it replays through the patch (`stack-detection-local-steps`).
  it('has a recorded history of each drift round mode, a round in groups, a session, both runner DAGs and a stack detection', () => {
    expect(files.sort()).toEqual([
      'drift-round-full.binpb',
      'drift-round-groups.binpb',
      'drift-round-partial.binpb',
      'drift-round-proposals-together.binpb',
      'drift-round-proposals.binpb',
      'runner-detect.binpb',
      'runner-repair-compensated.binpb',
      'runner-repair.binpb',
      'session.binpb',
      'stack-detection.binpb',
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

  it('fails to replay a recorded round once an incompatible change (an activity renamed) ships unversioned', async () => {
    const changed = await bundleWorkflowCode({
      workflowsPath,
      logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} },
      webpackConfigHook: (config) => {
        config.resolve = {
          ...config.resolve,
          alias: {
            ...(config.resolve?.alias as Record<string, string> | undefined),
            '@temporalio/workflow$': join(projectRoot, 'test/fixtures/changed/workflow-sdk.ts'),
          },
        };
        return config;
      },
    });
    for (const file of ['drift-round-full.binpb', 'drift-round-partial.binpb']) {
      const history = temporal.api.history.v1.History.decode(readFileSync(join(dir, file)));
      await expect(
        Worker.runReplayHistory({ workflowBundle: changed }, history, `changed-${file}`),
      ).rejects.toBeInstanceOf(DeterminismViolationError);
    }
  });
});
