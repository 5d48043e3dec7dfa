// Round workspaces: one checkout of the session branch per session on this worker, reused by its
// rounds — a later round fetches and resets it instead of cloning, and keeps the engine's
// `.terraform/` (providers and modules already linked) — with an engine client built for each
// round: the client carries the "init ran" flag, so init is submitted at most once per round (plus
// the re-inits the engine asks for). A workspace lost to a restart, or found on another worker, is
// rebuilt from the pushed branch: every cycle pushes before it returns, and a checkout this worker
// did not just hold is always brought to the remote's branch first.
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { basename, dirname, join, normalize, relative, sep } from 'node:path';
import { EngineClient } from './engine';
import type { EngineDeps } from './drift-detection';
import type { GitAccess } from './git-access';
import { GitError, type BranchChoice, type GitClient } from './git';
import { legacyStateProjectId } from '../shared/infra/db/sessions';
import { MANAGED_BACKEND_FILE } from './managed-state';
import { TerraformConfig } from './terraform-config';

import type { RoundRef } from '../shared/round-contracts';
export type { RoundRef };

export interface Workspace {
  /** The checkout. */
  dir: string;
  /** The root module inside it. */
  iacDir: string;
  /** A directory beside the checkout for the round's own files (plans, state exports). */
  scratch: string;
  engine: EngineClient;
  /** Git for the session's repository: remote calls carry its organization's credential only. */
  git: GitClient;
  /** True when the round found this worker's checkout of the session and fetched into it. */
  reused: boolean;
}

/**
 * A checkout of one commit beside a round's own (a git worktree of it), with an engine client of
 * its own: where a cycle's change is validated while the next cycle works on the branch.
 */
export interface Snapshot {
  dir: string;
  iacDir: string;
  /** The round's directory for its own files (the same as its workspace's). */
  scratch: string;
  engine: EngineClient;
}

/**
 * The directories under `root`, but those in `held`, whose last use (`lastUse`, epoch ms) is more
 * than `maxAgeMs` before `now`: what a workspace sweep removes.
 */
function staleDirectories(
  root: string,
  held: Set<string>,
  maxAgeMs: number,
  now: number,
  lastUse: (dir: string) => number,
): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((name) => join(root, name))
    .filter((dir) => !held.has(dir) && statSync(dir).isDirectory() && now - lastUse(dir) > maxAgeMs);
}

/** A session's checkout untouched this long belongs to a session that ended or moved: removed. */
export const STALE_CHECKOUT_MS = 24 * 60 * 60 * 1000;

/** What a reused checkout keeps of its untracked files: the engine's working directory. */
const KEEP = ['.terraform/'];

const safe = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');

export class RoundWorkspaces {
  /** Checkouts a round of this worker holds, by session: which round, and its workspace. */
  private readonly open = new Map<string, { roundId: string; ws: Workspace }>();
  /** The snapshot checkouts a round of this worker validates in, by session: those free, how many. */
  private readonly snapshots = new Map<string, { roundId: string; free: Snapshot[]; count: number }>();
  /** A session's `get` under way: the next waits for it (two steps of a round may run at once). */
  private readonly getting = new Map<string, Promise<unknown>>();
  private lastSweep = 0;

  constructor(
    private readonly root: string,
    private readonly git: GitClient,
    private readonly engines: Record<'terraform' | 'tofu', EngineDeps>,
    private readonly defaultEngine: 'terraform' | 'tofu',
    /** Each session's credential for its repository (absent: `git` as given, for every session). */
    private readonly access?: GitAccess,
  ) {}

  /**
   * Removes session directories no round of this worker holds whose checkout was last touched
   * more than `maxAgeMs` ago (an ended session, a session whose rounds run on another worker).
   * Returns the directories removed.
   */
  sweep(maxAgeMs = STALE_CHECKOUT_MS, now = Date.now()): string[] {
    const held = new Set([...this.open.values()].map((o) => dirname(o.ws.dir)));
    const removed = staleDirectories(this.root, held, maxAgeMs, now, (dir) =>
      Math.max(
        statSync(dir).mtimeMs,
        statSync(join(dir, 'repo', '.git', 'index'), { throwIfNoEntry: false })?.mtimeMs ?? 0,
      ),
    );
    for (const dir of removed) rmSync(dir, { recursive: true, force: true });
    return removed;
  }

  /**
   * The round's checkout: the one this round already holds; else this worker's checkout of the
   * session, fetched and reset to the pushed branch; else a fresh clone.
   */
  async get(ref: RoundRef): Promise<Workspace> {
    // One at a time per session: a cycle validated in its snapshot runs beside the next cycle, and
    // two first calls must not both clone into the same directory.
    const key = ref.sessionId;
    const before = this.getting.get(key) ?? Promise.resolve();
    const next = before.catch(() => undefined).then(() => this.getNow(ref));
    this.getting.set(key, next);
    try {
      return await next;
    } finally {
      if (this.getting.get(key) === next) this.getting.delete(key);
    }
  }

  private async getNow(ref: RoundRef): Promise<Workspace> {
    if (Date.now() - this.lastSweep > 60 * 60 * 1000) {
      this.lastSweep = Date.now();
      this.sweep();
    }
    const key = ref.sessionId;
    const known = this.open.get(key);
    if (known && known.roundId === ref.roundId && existsSync(join(known.ws.dir, '.git'))) {
      if (!ref.head || (await this.git.run(['rev-parse', 'HEAD'], known.ws.dir)).trim() === ref.head)
        return known.ws;
      // Another worker moved the branch since this one last held it: fetch and reset, keep the
      // engine's working directory (and this round's engine client, whose init still holds).
      await known.ws.git.refresh({
        url: ref.repositoryUrl,
        dir: known.ws.dir,
        branch: ref.branch,
        base: ref.baseBranch,
        keep: KEEP,
      });
      return known.ws;
    }
    // The session's directory: its checkout (`repo`), the round's own files (`run`, the engine's
    // writable directory besides the checkout it plans in) and the snapshot checkouts
    // (`validate-N`), side by side — an engine process of one of them cannot reach the others'.
    const sessionDir = join(this.root, safe(ref.sessionId));
    const dir = join(sessionDir, 'repo');
    const scratch = join(sessionDir, 'run');
    const target = { url: ref.repositoryUrl, dir, branch: ref.branch, base: ref.baseBranch };
    const git = this.access ? await this.access.forSession(ref.sessionId, ref.repositoryUrl) : this.git;
    const { warm: reused } = await fetchOrClone(git, target, KEEP, () => {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(sessionDir, { recursive: true });
    });
    mkdirSync(scratch, { recursive: true });
    const iacDir = resolveIacDir(dir, ref.iacPath);
    if (!existsSync(iacDir))
      throw new Error(`IaC path ${ref.iacPath} does not exist in ${ref.repositoryUrl}`);
    const ws: Workspace = {
      dir,
      iacDir,
      scratch,
      reused,
      git,
      engine: this.engineFor(ref, iacDir, scratch),
    };
    this.open.set(key, { roundId: ref.roundId, ws });
    return ws;
  }

  /** An engine client for the round working in `workdir` (the checkout's root, or a snapshot's). */
  private engineFor(ref: RoundRef, workdir: string, scratch: string): EngineClient {
    const deps = this.engines[ref.engine ?? this.defaultEngine];
    const credentials = deps.cloudCredentials;
    return new EngineClient({
      ...deps,
      workdir,
      runDir: scratch,
      // The session's organization's own cloud credentials, when it has a role for this cloud.
      ...(credentials
        ? {
            // A round of no organization's session (started from the Temporal CLI) has none.
            runCredentials: async () =>
              credentials.forRun({
                organization_uuid: await credentials.sessionOrganization(ref.sessionId),
                cloud: ref.cloud,
                run: `${ref.sessionId}-${ref.roundId}`,
              }),
          }
        : {}),
      scopeId: ref.scopeId,
      stateProjectId: ref.stateProjectId ?? legacyStateProjectId(ref.repositoryUrl, ref.iacPath, ref.scopeId),
    });
  }

  /**
   * A snapshot checkout of the round at `commit`, not in use by another step: a worktree of the
   * round's checkout beside it in the session's directory (what its engine writes: it and the
   * round's own files), brought to the commit and cleaned but for the engine's working directory; each keeps its engine
   * client, which runs init once a round. The branch and the round's checkout are left alone — a
   * step on them may be under way. `release` hands the snapshot back.
   */
  async snapshot(ref: RoundRef, commit: string): Promise<Snapshot & { release(): void }> {
    const { head: _head, ...anyHead } = ref;
    const ws = await this.get(anyHead);
    let pool = this.snapshots.get(ref.sessionId);
    if (pool?.roundId !== ref.roundId) {
      pool = { roundId: ref.roundId, free: [], count: 0 };
      this.snapshots.set(ref.sessionId, pool);
    }
    const snap =
      pool.free.pop() ??
      ((): Snapshot => {
        const dir = join(dirname(ws.dir), `validate-${pool.count++}`);
        const iacDir = resolveIacDir(dir, ref.iacPath);
        return { dir, iacDir, scratch: ws.scratch, engine: this.engineFor(ref, iacDir, ws.scratch) };
      })();
    const release = () => {
      if (this.snapshots.get(ref.sessionId) === pool) pool.free.push(snap);
    };
    try {
      const known = await this.git.run(['cat-file', '-t', commit], ws.dir).then(
        (t) => t.trim() === 'commit',
        () => false,
      );
      // A step of the round that ran on another worker committed it: the pushed branch has it.
      if (!known) await ws.git.run(['fetch', '--quiet', '--no-tags', 'origin', ref.branch], ws.dir);
      if (existsSync(join(snap.dir, '.git'))) {
        await this.git.run(['checkout', '--quiet', '--force', '--detach', commit], snap.dir);
        // The engine's lock file stays too when the repository does not track it (else init again).
        await this.git.run(['clean', '-ffdq', '-e', '.terraform/', '-e', '.terraform.lock.hcl'], snap.dir);
      } else {
        rmSync(snap.dir, { recursive: true, force: true });
        await this.git.run(['worktree', 'prune'], ws.dir);
        await this.git.run(['worktree', 'add', '--quiet', '--force', '--detach', snap.dir, commit], ws.dir);
      }
    } catch (err) {
      release();
      throw err;
    }
    return { ...snap, release };
  }

  /**
   * The round is over on this worker: its own files go, the checkout stays for the session's next
   * round (the sweep removes it once the session has been idle for a day).
   */
  release(ref: RoundRef): void {
    const known = this.open.get(ref.sessionId);
    if (known?.roundId === ref.roundId) this.open.delete(ref.sessionId);
    if (this.snapshots.get(ref.sessionId)?.roundId === ref.roundId) this.snapshots.delete(ref.sessionId);
    const scratch = join(this.root, safe(ref.sessionId));
    if (!existsSync(scratch)) return;
    for (const f of readdirSync(scratch)) {
      if (f !== 'repo') rmSync(join(scratch, f), { recursive: true, force: true });
    }
  }
}

/** The root directory inside a checkout; refuses paths that leave it. */
export function resolveIacDir(checkout: string, iacPath: string): string {
  const dir = normalize(join(checkout, iacPath || '.'));
  const rel = relative(checkout, dir);
  if (rel.startsWith('..')) throw new Error(`IaC path ${iacPath} leaves the repository`);
  return dir;
}

const CONFIG_FILE = /\.tf$|\.tfvars$/;

/**
 * The configuration a remediation may edit: the root module's .tf and .tfvars files and those of
 * every local module it calls (followed through `source = "./…"` or `"../…"`, inside the checkout).
 * Paths are relative to the root module, posix-style.
 */
export async function readConfigFiles(
  iacDir: string,
  checkoutDir: string,
): Promise<{ path: string; content: string }[]> {
  const config = await TerraformConfig.load((rel) => {
    const out = new Map<string, string>();
    const abs = normalize(join(iacDir, rel));
    if (relative(checkoutDir, abs).startsWith('..') || !existsSync(abs) || !statSync(abs).isDirectory())
      return out;
    // Through no symbolic link: a committed `x.tf -> /proc/self/environ` (or a module directory
    // linked outside) would otherwise hand the worker's own files to the model and the artifacts.
    if (relative(realpathSync(checkoutDir), realpathSync(abs)).startsWith('..')) return out;
    for (const f of readdirSync(abs).sort()) {
      if (!CONFIG_FILE.test(f) || f === MANAGED_BACKEND_FILE) continue;
      if (!lstatSync(join(abs, f)).isFile()) continue;
      const path = (rel ? `${rel}/${f}` : f).split(sep).join('/');
      out.set(path.replace(/^\.\//, ''), readFileSync(join(abs, f), 'utf8'));
    }
    return out;
  });
  config.dispose();
  return [...config.files].map(([path, content]) => ({ path, content }));
}

/**
 * Brings `target.dir` to the tip of `target.branch`: fetched into the checkout already there, keeping
 * `keep`, else — no checkout, or not a usable one of this repository (a broken clone, another URL) —
 * cloned after `clear` makes way. True when it fetched.
 */
async function fetchOrClone(
  git: GitClient,
  target: { url: string; dir: string; branch: string | BranchChoice; base?: string },
  keep: string[],
  clear: () => void,
): Promise<{ warm: boolean; branch: string }> {
  if (existsSync(join(target.dir, '.git'))) {
    try {
      return { warm: true, branch: await git.refresh({ ...target, keep }) };
    } catch (err) {
      // A checkout git cannot bring to the branch is cloned again below; the branch choice's own
      // refusal is the answer.
      if (!(err instanceof GitError)) throw err;
    }
  }
  clear();
  return { warm: false, branch: await git.checkout(target) };
}

/**
 * A stack's workspace no run has used this long is removed: longer than the longest interval a
 * schedule may have (a week), so only a deleted stack's, or one whose runs went elsewhere, goes.
 */
export const STALE_STACK_WORKSPACE_MS = 8 * 24 * 60 * 60 * 1000;

/** The prefix of a swept workspace on its way out. */
const SWEPT = '.swept-';

/**
 * What a stack's warm checkout keeps of its untracked files: the engine's working directory and the
 * lock file init wrote when the repository has none (tracked files are reset to the branch).
 */
const STACK_KEEP = [...KEEP, '.terraform.lock.hcl'];

/** A stack's warm workspace for one detection run (StackWorkspaces.hold). */
export interface StackWorkspace {
  /** The checkout, at the tip of the stack's branch. */
  dir: string;
  /** The branch checked out (the stack's, or the one its choice took from the remote's). */
  branch: string;
  /** The run's own files (the plan, its JSON): emptied before and after the run. */
  scratch: string;
  /** What the engine sandbox may write: the checkout and the scratch directory. */
  runDir: string;
  /** True when the run fetched into this worker's checkout of the stack instead of cloning. */
  warm: boolean;
  /** True when the last run here planned (after its init): this run may plan without one. */
  initialized: boolean;
  /** Records that this run planned here. */
  markInitialized(): void;
}

/** What identifies a stack's workspace: a change to any of these starts a fresh one. */
export interface StackWorkspaceKey {
  stack_uuid: string;
  organization_uuid: string;
  repository_url: string;
  /** The engine binary (its path carries its version). */
  engine: string;
}

/**
 * Stack detections' checkouts on this worker: one per stack, kept between its scheduled runs with
 * the engine's `.terraform/` — a run fetches and resets instead of cloning, and plans without an
 * init when the last one here succeeded (the engine asks for init when the lock file, a module
 * source or the backend changed, and the run then inits and plans again). One run of a stack at a
 * time on this worker; runs of different stacks share nothing. The workspace belongs to the stack's
 * organization, repository and engine: another of these starts a fresh one. Everything but the
 * checkout's tracked files and `.terraform/` is removed before each run, so a run starts from the
 * branch as pushed, whatever the previous run's code wrote.
 */
export class StackWorkspaces {
  private readonly held = new Map<string, Promise<unknown>>();
  private lastSweep = 0;

  constructor(private readonly root: string) {}

  /**
   * Removes the workspaces of stacks no run of this worker holds that no run has used for longer
   * than `maxAgeMs` (a deleted stack, a stack whose runs now go to another worker, one whose
   * organization, repository or engine changed): moved aside at once, so a run that begins now
   * clones afresh, and removed from disk after. Returns the stack directories removed.
   */
  sweep(maxAgeMs = STALE_STACK_WORKSPACE_MS, now = Date.now()): string[] {
    const held = new Set([...this.held.keys()].map((k) => join(this.root, safe(k))));
    // Every run marks the stack's directory as used when it begins; one on its way out is not a stack's.
    const removed = staleDirectories(this.root, held, maxAgeMs, now, (dir) =>
      dir.startsWith(join(this.root, SWEPT)) ? now : statSync(dir).mtimeMs,
    );
    for (const dir of removed) {
      const aside = join(this.root, `${SWEPT}${basename(dir)}-${now}`);
      renameSync(dir, aside);
      void rm(aside, { recursive: true, force: true }).catch(() => undefined);
    }
    return removed;
  }

  /**
   * Runs `fn` in the stack's workspace at the tip of `branch` (fetched with `git`, the
   * organization's credential; a choice picks it from the branches the fetch or clone brought),
   * after any run of the same stack on this worker. A clone that fails throws its GitError.
   */
  async hold<T>(
    key: StackWorkspaceKey,
    checkout: { git: GitClient; branch: string | BranchChoice },
    fn: (ws: StackWorkspace) => T | Promise<T>,
  ): Promise<T> {
    if (Date.now() - this.lastSweep > 60 * 60 * 1000) {
      this.lastSweep = Date.now();
      this.sweep();
    }
    const previous = this.held.get(key.stack_uuid) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => this.run(key, checkout, fn));
    this.held.set(key.stack_uuid, run);
    try {
      return await run;
    } finally {
      if (this.held.get(key.stack_uuid) === run) this.held.delete(key.stack_uuid);
    }
  }

  private async run<T>(
    key: StackWorkspaceKey,
    { git, branch }: { git: GitClient; branch: string | BranchChoice },
    fn: (ws: StackWorkspace) => T | Promise<T>,
  ): Promise<T> {
    const stackDir = join(this.root, safe(key.stack_uuid));
    const id = createHash('sha256')
      .update(JSON.stringify([key.organization_uuid, key.repository_url, key.engine]))
      .digest('hex')
      .slice(0, 16);
    const runDir = join(stackDir, id);
    const dir = join(runDir, 'repo');
    const scratch = join(runDir, 'run');
    // The marker lives outside what the sandboxed engine may write.
    const marker = join(stackDir, `${id}.initialized`);
    // The workspace's last use, as the sweep reads it.
    mkdirSync(stackDir, { recursive: true });
    const begun = new Date();
    utimesSync(stackDir, begun, begun);
    for (const f of readdirSync(stackDir))
      if (f !== id && f !== `${id}.initialized`) rmSync(join(stackDir, f), { recursive: true, force: true });
    if (existsSync(runDir))
      for (const f of readdirSync(runDir))
        if (f !== 'repo') rmSync(join(runDir, f), { recursive: true, force: true });
    const target = { url: key.repository_url, dir, branch };
    const { warm, branch: checkedOut } = await fetchOrClone(git, target, STACK_KEEP, () => {
      rmSync(runDir, { recursive: true, force: true });
      rmSync(marker, { force: true });
      mkdirSync(runDir, { recursive: true });
    });
    mkdirSync(scratch, { recursive: true });
    // Written again only when this run's plan succeeds.
    const initialized = warm && existsSync(marker);
    rmSync(marker, { force: true });
    try {
      return await fn({
        dir,
        branch: checkedOut,
        scratch,
        runDir,
        warm,
        initialized,
        markInitialized: () => writeFileSync(marker, ''),
      });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }
}
