// A step's commit found by its marker as a line of its own (GitClient.commitsByMarker, which every
// retry's look-up uses): group 1's marker is the start of group 10's, and a retry must not take
// group 10's commit for group 1's. Real git, local.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gitClient } from '../support/stack';

describe("a cycle's commit by its marker", () => {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-markers-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finds each marker as a whole line, the newest commit first, in one look-up', async () => {
    const git = gitClient();
    const run = (...args: string[]) =>
      execFileSync('git', args, { cwd: dir, env: git.env(), stdio: 'pipe' }).toString().trim();
    run('init', '--quiet', '--initial-branch=main');
    const commit = (n: number, marker: string) => {
      writeFileSync(join(dir, 'main.tf'), `# ${n}\n`);
      run('add', '--all');
      run('commit', '--quiet', '-m', `Reconcile drift: group ${n}\n\n${marker}`);
      return run('rev-parse', 'HEAD');
    };
    const m = (g: number) => `Kumoss-Cycle: s-1/r1/1/${g}`;
    const one = commit(1, m(1));
    const ten = commit(10, m(10));
    const found = await git.commitsByMarker(dir, [m(1), m(10), m(2)]);
    expect(Object.fromEntries(found)).toEqual({ [m(1)]: one, [m(10)]: ten });
    // Of a revision other than HEAD.
    expect(Object.fromEntries(await git.commitsByMarker(dir, [m(1), m(10)], `${ten}^`))).toEqual({
      [m(1)]: one,
    });
  });
});
