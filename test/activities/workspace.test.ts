// Session checkouts left behind (an ended session, a session whose rounds run on another worker)
// are swept once they have been untouched for a day; checkouts a round of this worker holds, and
// recent ones, stay.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import {
  RoundWorkspaces,
  STALE_CHECKOUT_MS,
  STALE_STACK_WORKSPACE_MS,
  StackWorkspaces,
  type RoundRef,
} from '../../activities/workspace';
import { engineDeps, gitClient, stack } from '../support/stack';

describe('RoundWorkspaces.sweep', () => {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-sweep-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const checkout = (session: string, ageMs: number) => {
    const dir = join(root, session);
    mkdirSync(join(dir, 'repo', '.git'), { recursive: true });
    writeFileSync(join(dir, 'repo', '.git', 'index'), '');
    const t = new Date(Date.now() - ageMs);
    utimesSync(join(dir, 'repo', '.git', 'index'), t, t);
    utimesSync(dir, t, t);
    return dir;
  };

  it('removes session checkouts untouched for longer than a day', () => {
    const old = checkout('s-old', STALE_CHECKOUT_MS + 60_000);
    const fresh = checkout('s-fresh', 60_000);
    const ws = new RoundWorkspaces(
      root,
      gitClient(),
      { terraform: engineDeps(), tofu: engineDeps('tofu') },
      'terraform',
    );
    expect(ws.sweep()).toEqual([old]);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
  });
});

describe('RoundWorkspaces: one checkout per session, reused by its rounds', () => {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-reuse-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  function seedRepository(name: string): string {
    const git = gitClient();
    const src = mkdtempSync(join(root, 'src-'));
    const run = (...args: string[]) => execFileSync('git', args, { cwd: src, env: git.env(), stdio: 'pipe' });
    run('init', '--quiet', '--initial-branch=main');
    writeFileSync(join(src, 'main.tf'), 'terraform {}\n');
    run('add', '--all');
    run('commit', '--quiet', '-m', 'initial');
    const url = `${stack().gitHostUrl}/${name}.git`;
    run('push', '--quiet', url, 'main');
    return url;
  }

  const ref = (url: string, sessionId: string, roundId: string): RoundRef => ({
    sessionId,
    roundId,
    repositoryUrl: url,
    iacPath: '',
    scopeId: 'test-scope',
    cloud: 'aws',
    branch: `kumoss/${sessionId}`,
  });

  it("fetches into the session's checkout for its next round: the branch as pushed, leftovers gone, .terraform kept", async () => {
    const url = seedRepository(`team/reuse-${Date.now()}`);
    const git = gitClient();
    const workspaces = new RoundWorkspaces(
      join(root, 'work'),
      git,
      { terraform: engineDeps(), tofu: engineDeps('tofu') },
      'terraform',
    );
    const r1 = await workspaces.get(ref(url, 's-reuse', 'r1'));
    expect(r1.reused).toBe(false);
    // Round 1 pushes a commit, leaves an untracked file, an edit it never committed, a plan in its
    // scratch directory and the engine's working directory.
    writeFileSync(join(r1.dir, 'main.tf'), 'terraform {}\n# round 1\n');
    await git.commitAll(r1.dir, 'round 1', ['main.tf']);
    await git.push(r1.dir, 'kumoss/s-reuse');
    writeFileSync(join(r1.dir, 'main.tf'), 'terraform {}\n# never committed\n');
    writeFileSync(join(r1.dir, 'leftover.tf'), '# untracked\n');
    mkdirSync(join(r1.dir, '.terraform', 'providers'), { recursive: true });
    writeFileSync(join(r1.dir, '.terraform', 'providers', 'plugin'), 'linked');
    writeFileSync(join(r1.scratch, 'r1-1.tfplan'), 'plan');
    expect(await workspaces.get(ref(url, 's-reuse', 'r1'))).toBe(r1);
    workspaces.release(ref(url, 's-reuse', 'r1'));
    expect(existsSync(join(r1.scratch, 'r1-1.tfplan'))).toBe(false);
    expect(existsSync(r1.dir)).toBe(true);

    // Between the rounds a person pushes to the session branch.
    const other = join(mkdtempSync(join(root, 'person-')), 'co');
    await git.checkout({ url, dir: other, branch: 'kumoss/s-reuse' });
    writeFileSync(join(other, 'extra.tf'), '# by a person\n');
    const theirs = await git.commitAll(other, 'A change by a person');
    await git.push(other, 'kumoss/s-reuse');

    const r2 = await workspaces.get(ref(url, 's-reuse', 'r2'));
    expect(r2.reused).toBe(true);
    expect(r2.dir).toBe(r1.dir);
    expect(r2.engine).not.toBe(r1.engine); // init runs once in every round
    expect(await git.head(r2.dir)).toBe(theirs.sha);
    expect(readFileSync(join(r2.dir, 'main.tf'), 'utf8')).toBe('terraform {}\n# round 1\n');
    expect(existsSync(join(r2.dir, 'extra.tf'))).toBe(true);
    expect(existsSync(join(r2.dir, 'leftover.tf'))).toBe(false);
    expect(readFileSync(join(r2.dir, '.terraform', 'providers', 'plugin'), 'utf8')).toBe('linked');
    // Nothing else differs from the pushed branch: the engine's directory is the one untracked entry.
    expect((await git.run(['status', '--porcelain'], r2.dir)).trim()).toBe('?? .terraform/');
  });

  it("brings a checkout it holds for the round to the step's commit when another worker moved the branch", async () => {
    const url = seedRepository(`team/two-workers-${Date.now()}`);
    const git = gitClient();
    const worker = (name: string) =>
      new RoundWorkspaces(
        join(root, name),
        git,
        { terraform: engineDeps(), tofu: engineDeps('tofu') },
        'terraform',
      );
    const [a, b] = [worker('worker-a'), worker('worker-b')];
    const r = ref(url, 's-two', 'r1');
    // Step 1 on worker A, step 2 on worker B, which commits and pushes.
    const onA = await a.get(r);
    const start = await git.head(onA.dir);
    const onB = await b.get({ ...r, head: start });
    writeFileSync(join(onB.dir, 'main.tf'), 'terraform {}\n# cycle on worker B\n');
    const cycle = await git.commitAll(onB.dir, 'cycle', ['main.tf']);
    await git.push(onB.dir, r.branch);
    // Step 3 lands on A again, which still holds its checkout for the round at the old commit.
    const again = await a.get({ ...r, head: cycle.sha });
    expect(again).toBe(onA);
    expect(await git.head(again.dir)).toBe(cycle.sha);
    expect(readFileSync(join(again.dir, 'main.tf'), 'utf8')).toBe('terraform {}\n# cycle on worker B\n');
    // At the step's commit already: no fetch (the same checkout, the same commit).
    expect(await a.get({ ...r, head: cycle.sha })).toBe(onA);
  });

  it('clones again when the checkout on disk is not one of the repository (a restart finds another)', async () => {
    const url = seedRepository(`team/reuse-other-${Date.now()}`);
    const elsewhere = seedRepository(`team/reuse-elsewhere-${Date.now()}`);
    const workspaces = () =>
      new RoundWorkspaces(
        join(root, 'work2'),
        gitClient(),
        { terraform: engineDeps(), tofu: engineDeps('tofu') },
        'terraform',
      );
    const first = await workspaces().get(ref(elsewhere, 's-moved', 'r1'));
    expect(first.reused).toBe(false);
    // A new worker process (nothing held) with a checkout of another repository under that session.
    const ws = await workspaces().get(ref(url, 's-moved', 'r2'));
    expect(ws.reused).toBe(false);
    expect((await gitClient().run(['remote', 'get-url', 'origin'], ws.dir)).trim()).toBe(url);
    // And a new worker process with this repository's checkout fetches into it.
    const again = await workspaces().get(ref(url, 's-moved', 'r3'));
    expect(again.reused).toBe(true);
  });
});

describe("StackWorkspaces: a stack's detections share one warm checkout on this worker", () => {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-stack-ws-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const git = gitClient();

  async function pushFiles(url: string | undefined, files: Record<string, string>): Promise<string> {
    const src = mkdtempSync(join(root, 'src-'));
    const run = (...args: string[]) => execFileSync('git', args, { cwd: src, env: git.env(), stdio: 'pipe' });
    const target = url ?? `${stack().gitHostUrl}/team/stack-ws-${Date.now()}.git`;
    if (url) await git.checkout({ url, dir: src, branch: 'main' });
    else run('init', '--quiet', '--initial-branch=main');
    for (const [name, text] of Object.entries(files)) writeFileSync(join(src, name), text);
    run('add', '--all');
    run('commit', '--quiet', '-m', 'change');
    run('push', '--quiet', target, 'HEAD:main');
    return target;
  }

  const at = { git, branch: 'main' };

  it('fetches instead of cloning, keeps .terraform, and removes whatever the last run wrote elsewhere', async () => {
    const url = await pushFiles(undefined, { 'main.tf': 'terraform {}\n' });
    const ws = new StackWorkspaces(join(root, 'work'));
    const key = { stack_uuid: 'st-1', organization_uuid: 'org-a', repository_url: url, engine: '/bin/tf' };
    const first = await ws.hold(key, at, (w) => {
      expect(w).toMatchObject({ warm: false, initialized: false });
      // What a run's code could leave behind: an edit, an untracked file, a file beside the
      // checkout, the run's plan; and the engine's working directory.
      writeFileSync(join(w.dir, 'main.tf'), 'terraform {}\n# edited by the run\n');
      writeFileSync(join(w.dir, 'planted.tf'), 'resource "x" "y" {}\n');
      writeFileSync(join(w.runDir, 'planted'), 'x');
      writeFileSync(join(w.scratch, 'plan.tfplan'), 'plan');
      mkdirSync(join(w.dir, '.terraform', 'providers'), { recursive: true });
      writeFileSync(join(w.dir, '.terraform', 'providers', 'plugin'), 'linked');
      w.markInitialized();
      return w;
    });
    expect(existsSync(first.scratch)).toBe(false);
    const pushed = await pushFiles(url, { 'extra.tf': '# pushed between the runs\n' });
    expect(pushed).toBe(url);

    await ws.hold(key, at, async (w) => {
      expect(w).toMatchObject({ warm: true, initialized: true, dir: first.dir });
      expect(readFileSync(join(w.dir, 'main.tf'), 'utf8')).toBe('terraform {}\n');
      expect(existsSync(join(w.dir, 'extra.tf'))).toBe(true);
      expect(existsSync(join(w.dir, 'planted.tf'))).toBe(false);
      expect(existsSync(join(w.runDir, 'planted'))).toBe(false);
      expect(readFileSync(join(w.dir, '.terraform', 'providers', 'plugin'), 'utf8')).toBe('linked');
      expect((await git.run(['status', '--porcelain'], w.dir)).trim()).toBe('?? .terraform/');
      // This run does not plan: the next one inits first.
    });
    await ws.hold(key, at, (w) => {
      expect(w).toMatchObject({ warm: true, initialized: false });
    });

    // Another organization (or repository, or engine) never inherits the checkout.
    await ws.hold({ ...key, organization_uuid: 'org-b' }, at, (w) => {
      expect(w).toMatchObject({ warm: false, initialized: false });
      expect(w.dir).not.toBe(first.dir);
      expect(existsSync(join(w.dir, '.terraform'))).toBe(false);
    });
    expect(existsSync(first.dir)).toBe(false);
  });

  it("sweeps the workspaces no run has used for longer than a schedule's longest interval, never one a run holds", async () => {
    const url = await pushFiles(undefined, { 'main.tf': 'terraform {}\n' });
    const work = join(root, 'work-sweep');
    const ws = new StackWorkspaces(work);
    const key = (stack_uuid: string) => ({
      stack_uuid,
      organization_uuid: 'org-a',
      repository_url: url,
      engine: '/bin/tf',
    });
    const dirOf = (stack_uuid: string) => join(work, stack_uuid);
    const age = (stack_uuid: string, ms: number) => {
      const t = new Date(Date.now() - ms);
      utimesSync(dirOf(stack_uuid), t, t);
    };
    const stale = STALE_STACK_WORKSPACE_MS + 60_000;
    // A deleted stack's workspace, a recent one, and one whose (long) run is still going.
    for (const s of ['gone', 'recent']) await ws.hold(key(s), at, () => undefined);
    age('gone', stale);
    age('recent', STALE_STACK_WORKSPACE_MS - 60_000);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const long = ws.hold(key('long'), at, async (w) => {
      started();
      await gate;
      return readFileSync(join(w.dir, 'main.tf'), 'utf8');
    });
    await running;
    age('long', stale);

    expect(ws.sweep()).toEqual([dirOf('gone')]);
    expect(existsSync(dirOf('gone'))).toBe(false);
    expect(existsSync(dirOf('recent'))).toBe(true);
    release();
    expect(await long).toBe('terraform {}\n');
    // Nothing of the swept workspace is left once its removal is done; the stack's next run clones.
    await expect.poll(() => readdirSync(work).sort()).toEqual(['long', 'recent']);
    await ws.hold(key('gone'), at, (w) => expect(w.warm).toBe(false));
    // Only its run kept the long run's aged workspace: once the run ends, it goes too.
    expect(ws.sweep()).toEqual([dirOf('long')]);
  });

  it('runs one detection of a stack at a time; other stacks run beside it', async () => {
    const url = await pushFiles(undefined, { 'main.tf': 'terraform {}\n' });
    const ws = new StackWorkspaces(join(root, 'work-serial'));
    const key = (stack_uuid: string) => ({
      stack_uuid,
      organization_uuid: 'org-a',
      repository_url: url,
      engine: '/bin/tf',
    });
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const a1Started = new Promise<void>((r) => (started = r));
    const a1 = ws.hold(key('a'), at, async () => {
      log.push('a1 start');
      started();
      await gate;
      log.push('a1 end');
    });
    const a2 = ws.hold(key('a'), at, () => void log.push('a2'));
    // Stack b runs, start to end, while stack a's first run holds its workspace.
    await a1Started;
    await ws.hold(key('b'), at, () => void log.push('b'));
    release();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b', 'a1 end', 'a2']);
  });

  it('chooses the branch from what the clone or fetch brought: a branch pushed between runs seen, a refusal kept, a host that does not answer is a GitError', async () => {
    const url = await pushFiles(undefined, { 'main.tf': 'terraform {}\n' });
    const ws = new StackWorkspaces(join(root, 'work-choice'));
    const key = { stack_uuid: 'st-c', organization_uuid: 'org-a', repository_url: url, engine: '/bin/tf' };
    const seen: Array<Record<string, string>> = [];
    const choice = (wanted: string) => ({
      git,
      branch: (remote: Map<string, string>) => {
        seen.push(Object.fromEntries(remote));
        if (!remote.has(wanted)) throw new Error(`branch ${wanted} not found`);
        return wanted;
      },
    });
    const main = await ws.hold(key, choice('main'), (w) => ({ branch: w.branch, warm: w.warm, dir: w.dir }));
    const tip = (await git.run(['rev-parse', 'HEAD'], main.dir)).trim();
    expect(main).toMatchObject({ branch: 'main', warm: false });
    expect(seen[0]).toEqual({ main: tip });

    // A branch pushed between the runs: the warm run's fetch brings it, and the choice takes it.
    const src = mkdtempSync(join(root, 'src-'));
    await git.checkout({ url, dir: src, branch: 'release' });
    writeFileSync(join(src, 'release.tf'), '# release\n');
    await git.commitAll(src, 'release');
    await git.push(src, 'release');
    const release = await ws.hold(key, choice('release'), async (w) => ({
      branch: w.branch,
      warm: w.warm,
      head: (await git.run(['rev-parse', '--abbrev-ref', 'HEAD'], w.dir)).trim(),
      file: existsSync(join(w.dir, 'release.tf')),
    }));
    expect(release).toEqual({ branch: 'release', warm: true, head: 'release', file: true });
    expect(Object.keys(seen[1]!).sort()).toEqual(['main', 'release']);

    // The choice's refusal is the answer (not a clone again); the checkout stays warm.
    await expect(ws.hold(key, choice('gone'), () => 'ran')).rejects.toThrow('branch gone not found');
    expect(seen).toHaveLength(3);
    expect(await ws.hold(key, choice('main'), (w) => w.warm)).toBe(true);

    // A repository on a host that does not answer: the clone's GitError, the function not run.
    const other = { ...key, stack_uuid: 'st-d', repository_url: 'https://127.0.0.1:1/team/none.git' };
    await expect(ws.hold(other, choice('main'), () => 'ran')).rejects.toThrow(/^git clone failed/);
    expect(seen).toHaveLength(4);
  });

  it('a warm detection plans without init, and inits when the pushed code needs it', async () => {
    const url = await pushFiles(undefined, {
      'main.tf': 'resource "terraform_data" "a" {\n  input = "a"\n}\n',
    });
    const ws = new StackWorkspaces(join(root, 'work-engine'));
    const key = { stack_uuid: 'st-e', organization_uuid: 'org-a', repository_url: url, engine: '/bin/tf' };
    const detect = () =>
      ws.hold(key, at, async (w) => {
        const engine = new EngineClient({ ...engineDeps(), workdir: w.dir, runDir: w.runDir, scopeId: 's' });
        if (w.initialized) engine.assumeInitialized();
        const plan = await engine.plan({ out: join(w.scratch, 'plan.tfplan') });
        w.markInitialized();
        return { verbs: engine.calls.map((c) => c.args[0]), hasChanges: plan.hasChanges };
      });
    expect(await detect()).toEqual({ verbs: ['init', 'plan'], hasChanges: true });
    expect(await detect()).toEqual({ verbs: ['plan'], hasChanges: true });
    // A provider the checkout's .terraform does not have: the plan asks for init, which runs.
    await pushFiles(url, {
      'versions.tf':
        'terraform {\n  required_providers {\n    local = {\n      source  = "hashicorp/local"\n      version = "1.4.0"\n    }\n  }\n}\n',
      'file.tf': 'data "local_file" "f" {\n  filename = "${path.module}/main.tf"\n}\n',
    });
    expect((await detect()).verbs).toEqual(['plan', 'init', 'plan']);
    expect((await detect()).verbs).toEqual(['plan']);
  });
});
