// Determinism: recorded histories of every workflow (test/fixtures/histories, binary protobuf written by
// `node --import tsx scripts/record-histories.ts`) replayed against the current code. A change
// that would break runs already in flight fails here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../shared/config';
import { stack } from '../support/stack';

const dir = join(projectRoot, 'test', 'fixtures', 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.binpb'));

describe('replay of recorded histories', () => {
  it('has a recorded history of each drift round mode, a session and both runner DAGs', () => {
    expect(files.sort()).toEqual([
      'drift-round-full-before-store.binpb',
      'drift-round-full.binpb',
      'drift-round-partial-before-store.binpb',
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
});
