// A model's edit lands only inside the root's repository, never in .git/ or .terraform/, never
// through a symbolic link: paths an attacker's model answer would try, on a real checkout on disk.
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeModelEdits } from '../../activities/drift-round';
import { confinedEditTarget, ModelEditRefused } from '../../activities/model-edits';
import type { Workspace } from '../../activities/workspace';

describe('model edits are confined to the checkout', () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-edits-'));
  const repo = join(base, 'repo');
  const root = join(repo, 'envs', 'prod');
  const outside = join(base, 'other-checkout');
  mkdirSync(root, { recursive: true });
  mkdirSync(join(repo, '.git'), { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(root, 'main.tf'), 'terraform {}\n');
  // Links a hostile repository could commit: a directory out of the checkout, a file to /etc.
  symlinkSync(outside, join(root, 'modules'));
  symlinkSync('/etc/hostname', join(root, 'vars.tf'));
  symlinkSync(join(repo, '.git'), join(repo, 'dotgit'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const refused = (path: string) => {
    try {
      confinedEditTarget(repo, root, path);
    } catch (err) {
      expect(err).toBeInstanceOf(ModelEditRefused);
      return (err as Error).message;
    }
    throw new Error(`${path} was not refused`);
  };

  it('accepts files of the root and of the repository, new directories included', () => {
    expect(confinedEditTarget(repo, root, 'main.tf')).toBe(join(root, 'main.tf'));
    expect(confinedEditTarget(repo, root, 'network/vpc.tf')).toBe(join(root, 'network', 'vpc.tf'));
    expect(confinedEditTarget(repo, root, '../../shared/tags.tf')).toBe(join(repo, 'shared', 'tags.tf'));
    expect(confinedEditTarget(repo, root, '.terraform.lock.hcl')).toBe(join(root, '.terraform.lock.hcl'));
  });

  it('refuses paths outside the repository', () => {
    expect(refused('../../../other-checkout/main.tf')).toMatch(/outside the repository/);
    expect(refused('../../..')).toMatch(/outside the repository/);
    expect(refused('../..')).toMatch(/outside the repository/);
  });

  it('refuses .git/ and .terraform/ however they are spelled, and the state override', () => {
    expect(refused('../../.git/config')).toMatch(/inside \.git\//);
    expect(refused('../../.GIT/hooks/post-checkout')).toMatch(/inside \.GIT\//);
    expect(refused('.terraform/providers/x')).toMatch(/inside \.terraform\//);
    expect(refused('sub/../.terraform/terraform.tfstate')).toMatch(/inside \.terraform\//);
    expect(refused('kumoss_managed_state_override.tf')).toMatch(/state override/);
  });

  it('refuses a path through a committed symbolic link, component by component', () => {
    expect(refused('modules/evil.tf')).toMatch(/symbolic link \(envs\/prod\/modules\)/);
    expect(refused('vars.tf')).toMatch(/symbolic link \(envs\/prod\/vars\.tf\)/);
    expect(refused('../../dotgit/config')).toMatch(/symbolic link \(dotgit\)/);
  });

  it("writes none of an answer's edits when one of them is refused", async () => {
    const ws = { dir: repo, iacDir: root } as Workspace; // refused before the engine or the store is used
    const edits = [
      { path: 'fresh.tf', content: 'resource "x" "y" {}\n' },
      { path: '../../.git/config', content: '[core]\n\tfsmonitor = sh -c "env > /tmp/leak"\n' },
    ];
    await expect(writeModelEdits(ws, undefined as never, edits, new Map(), 'changes')).rejects.toThrow(
      /inside \.git\//,
    );
    expect(existsSync(join(root, 'fresh.tf'))).toBe(false);
    expect(existsSync(join(repo, '.git', 'config'))).toBe(false);
  });
});
