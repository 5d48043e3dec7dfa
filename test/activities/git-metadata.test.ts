// Nothing the engine writes runs outside its sandbox: a repository's code at apply time tries to
// plant what the worker's next git call would run — hooks, `core.fsmonitor`, `core.hooksPath`, a
// filter driver named by a committed `.gitattributes`, an `includeIf` pulling in a config of its
// own, and a sibling worktree's `.git` redirected to a git directory it made — and the worker then
// commits, checks out and resets in that checkout. Real terraform under real bubblewrap, real git.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { GitClient } from '../../activities/git';
import { engineDeps } from '../support/stack';

describe("git outside the sandbox runs nothing a repository's code wrote", () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-git-metadata-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  const git = new GitClient();

  /**
   * A session's directory as RoundWorkspaces lays it out: the checkout (`repo`, one commit holding
   * `files`), the round's own files (`run`) and a snapshot worktree (`validate-0`) beside them.
   * `escaped` is a directory of the machine that only a program run outside the sandbox can write.
   */
  const session = async (files: Record<string, string>) => {
    const dir = mkdtempSync(join(base, 'session-'));
    const repo = join(dir, 'repo');
    const run = join(dir, 'run');
    const escaped = join(dir, 'escaped');
    for (const d of [repo, run, escaped]) mkdirSync(d, { recursive: true });
    execFileSync('git', ['init', '--quiet', '--initial-branch=main', repo], { env: git.processEnv(dir) });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(repo, name), text);
    await git.commitAll(repo, 'initial');
    await git.run(['worktree', 'add', '--quiet', '--detach', join(dir, 'validate-0'), 'HEAD'], repo);
    return { dir, repo, run, escaped };
  };

  /**
   * What a root's `local-exec` runs: each plant tried (its payload is a file the test wrote in the
   * checkout), its outcome recorded in `planted.txt`. What a plant makes run writes the uid it ran
   * as into `escaped/<name>`.
   */
  const writePlants = (repo: string, escaped: string) => {
    const evil = join(repo, 'evil.sh');
    writeFileSync(evil, `#!/bin/sh\nid -u > ${escaped}/$1\n`, { mode: 0o755 });
    mkdirSync(join(repo, 'hooks'));
    writeFileSync(join(repo, 'hooks', 'post-commit'), `#!/bin/sh\n${evil} hooks-path\n`, { mode: 0o755 });
    writeFileSync(join(repo, 'payload-hook'), `#!/bin/sh\n${evil} hook-$(basename $0)\n`, { mode: 0o755 });
    writeFileSync(join(repo, 'evil.inc'), `[filter "inc"]\n\tclean = ${evil} include-if\n`);
    writeFileSync(
      join(repo, 'payload-config'),
      [
        '[core]',
        `\tfsmonitor = ${evil} fsmonitor`,
        `\thooksPath = ${join(repo, 'hooks')}`,
        '[filter "evil"]',
        `\tclean = ${evil} filter`,
        '[includeIf "gitdir:/"]',
        `\tpath = ${join(repo, 'evil.inc')}`,
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(repo, 'plant.sh'),
      `#!/bin/sh
try() { if sh -c "$2" 2>/dev/null; then echo "$1 written"; else echo "$1 refused"; fi >> planted.txt; }
try hook 'mkdir -p .git/hooks && for h in pre-commit post-commit post-checkout; do cp payload-hook .git/hooks/$h; done'
try config 'cat payload-config >> .git/config'
try worktree 'echo "gitdir: $(pwd)/fake" > ../validate-0/.git'
try new-worktree 'mkdir -p ../validate-1/.git'
`,
    );
  };

  it('a local-exec at apply time cannot write .git/ or a sibling checkout, and the worker’s commit, checkout and reset run none of it', async () => {
    const s = await session({
      // Committed attributes naming the two drivers the plant tries to define.
      '.gitattributes': '*.tf filter=evil\n*.txt filter=inc\n',
      'main.tf': `resource "terraform_data" "plant" {
  provisioner "local-exec" {
    command = "sh ./plant.sh"
  }
}
`,
    });
    writePlants(s.repo, s.escaped);
    const configBefore = readFileSync(join(s.repo, '.git', 'config'), 'utf8');
    const worktreeBefore = readFileSync(join(s.dir, 'validate-0', '.git'), 'utf8');

    const engine = new EngineClient({
      ...engineDeps(),
      workdir: s.repo,
      runDir: s.run,
      scopeId: 'git-metadata',
    });
    await engine.init();
    await engine.apply();

    // Inside the sandbox: .git/ is read-only, the other checkouts of the session are not there.
    const planted = readFileSync(join(s.repo, 'planted.txt'), 'utf8').trim().split('\n');
    expect(planted).toEqual(expect.arrayContaining(['hook refused', 'config refused']));
    expect(readFileSync(join(s.repo, '.git', 'config'), 'utf8')).toBe(configBefore);
    expect(existsSync(join(s.repo, '.git', 'hooks', 'post-commit'))).toBe(false);
    expect(readFileSync(join(s.dir, 'validate-0', '.git'), 'utf8')).toBe(worktreeBefore);
    expect(existsSync(join(s.dir, 'validate-1'))).toBe(false);

    // Outside it: the worker's git in that checkout and in the worktree runs nothing of it.
    writeFileSync(join(s.repo, 'main.tf'), `${readFileSync(join(s.repo, 'main.tf'), 'utf8')}# edited\n`);
    writeFileSync(join(s.repo, 'notes.txt'), 'filtered?\n');
    expect((await git.commitAll(s.repo, 'Remediate', ['main.tf', 'notes.txt'])).created).toBe(true);
    await git.run(['checkout', '--quiet', '-b', 'kumoss/other'], s.repo);
    await git.discardChanges(s.repo, ['.terraform/']);
    await git.run(['checkout', '--quiet', '--force', '--detach', 'kumoss/other'], join(s.dir, 'validate-0'));
    expect(readdirSync(s.escaped)).toEqual([]);
  });

  it('hooks, fsmonitor, hooksPath and sshCommand in a checkout’s own config are not run by the worker’s git', async () => {
    // Where something did write .git/ (a sandbox switched off, another tool): the settings git
    // lets a command override are overridden for every git process of the worker.
    const s = await session({ 'main.tf': '# root\n' });
    const evil = join(s.repo, 'evil.sh');
    writeFileSync(evil, `#!/bin/sh\nid -u > ${s.escaped}/$1\n`, { mode: 0o755 });
    mkdirSync(join(s.repo, '.git', 'hooks'), { recursive: true });
    for (const hook of ['pre-commit', 'post-commit', 'post-checkout', 'reference-transaction'])
      writeFileSync(join(s.repo, '.git', 'hooks', hook), `#!/bin/sh\n${evil} ${hook}\n`, { mode: 0o755 });
    mkdirSync(join(s.repo, 'hooks'));
    writeFileSync(join(s.repo, 'hooks', 'post-commit'), `#!/bin/sh\n${evil} hooks-path\n`, { mode: 0o755 });
    execFileSync('git', ['config', 'core.fsmonitor', `${evil} fsmonitor`], { cwd: s.repo });
    execFileSync('git', ['config', 'core.sshCommand', `${evil} ssh`], { cwd: s.repo });
    execFileSync('git', ['config', 'core.askPass', `${evil} askpass`], { cwd: s.repo });
    // Plain git (what the worker ran before) runs the hook: the probe itself works.
    writeFileSync(join(s.repo, 'main.tf'), '# probe\n');
    execFileSync('git', ['commit', '--quiet', '-am', 'probe'], { cwd: s.repo, env: git.env() });
    expect(readdirSync(s.escaped).sort()).toEqual([
      'fsmonitor',
      'post-commit',
      'pre-commit',
      'reference-transaction',
    ]);
    for (const f of readdirSync(s.escaped)) rmSync(join(s.escaped, f));
    execFileSync('git', ['config', 'core.hooksPath', join(s.repo, 'hooks')], { cwd: s.repo });

    writeFileSync(join(s.repo, 'main.tf'), '# edited\n');
    await git.commitAll(s.repo, 'Remediate', ['main.tf']);
    await git.run(['checkout', '--quiet', '-b', 'kumoss/other'], s.repo);
    await git.discardChanges(s.repo);
    // An ssh remote is refused before any program runs.
    await expect(git.run(['ls-remote', 'ssh://git@127.0.0.1:1/x.git'], s.repo)).rejects.toThrow(
      /transport 'ssh' not allowed/,
    );
    expect(readdirSync(s.escaped)).toEqual([]);
  });
});
