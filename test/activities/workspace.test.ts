// Round checkouts left behind (a failed round, a round finished on another worker) are swept once
// they have been untouched for a day; checkouts a round of this worker holds, and recent ones, stay.
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RoundWorkspaces, STALE_CHECKOUT_MS } from '../../activities/workspace';
import { engineDeps, gitClient } from '../support/stack';

describe('RoundWorkspaces.sweep', () => {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-sweep-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const checkout = (session: string, round: string, ageMs: number) => {
    const dir = join(root, session, round);
    mkdirSync(join(dir, '.git'), { recursive: true });
    writeFileSync(join(dir, '.git', 'index'), '');
    const t = new Date(Date.now() - ageMs);
    utimesSync(join(dir, '.git', 'index'), t, t);
    utimesSync(dir, t, t);
    return dir;
  };

  it('removes checkouts untouched for longer than a day, and empty session directories', () => {
    const old = checkout('s-old', 'r1', STALE_CHECKOUT_MS + 60_000);
    const fresh = checkout('s-fresh', 'r1', 60_000);
    const ws = new RoundWorkspaces(
      root,
      gitClient(),
      { terraform: engineDeps(), tofu: engineDeps('tofu') },
      'terraform',
    );
    expect(ws.sweep()).toEqual([old]);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(join(root, 's-old'))).toBe(false);
    expect(existsSync(fresh)).toBe(true);
  });
});
