// Kumoss-managed state (issue 16; seed 001: the state project id is used "when Kumoss manages
// state"). A root module that declares no backend would keep its state in the checkout, which is a
// worker's scratch copy: lost with it, and never seen by the next worker. Such a root gets Kumoss's
// state instead: the object `<prefix>/<state project id>/terraform.tfstate` of the configured
// store, served to the engine by the worker's state server (activities/state-server.ts) over
// Terraform's `http` backend, so every worker's plan and apply read and write one state — and a
// lease per state project id in the metadata store (shared/infra/db/state-locks.ts) lets one engine call
// at a time change it.
//
// How: an override file (never committed: the checkout's .git/info/exclude names it, and the
// configuration readers skip it) adds `backend "http" {}`; every engine process gets the address
// and a grant valid for that process only in its environment (`TF_HTTP_*`), which Terraform keeps
// neither in `.terraform/` nor in a saved plan. The store's keys never leave the worker process.
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { checkoutOf } from './sandbox';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../shared/infra/db';
import {
  currentStateLockHolder,
  releaseStateLock,
  renewStateLock,
  tryAcquireStateLock,
} from '../shared/infra/db/state-locks';
import { createS3Client } from '../shared/infra/object-store';
import { StateServer } from './state-server';
import { blockLabels, topBlocks, withHcl } from './hcl';
import { blockNodes, bodyOf } from './terraform-config';

/** The override file that gives a root without a backend Kumoss's S3 backend. */
export const MANAGED_BACKEND_FILE = 'kumoss_managed_state_override.tf';

const BACKEND_BLOCK = `# Written by Kumoss for this checkout only (Kumoss-managed state); never committed.
terraform {
  backend "http" {}
}
`;

export interface ManagedStateConfig {
  /** The S3-compatible store (the artifact store unless configured otherwise). */
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Key prefix of the states: `<prefix>/<state project id>/terraform.tfstate`. */
  prefix: string;
  /** A lease not renewed for this long is free (its holder died). Default 30 s. */
  lockTtlMs?: number;
  /** How long an engine call waits for a held lease before it fails (and is retried). Default 10 min. */
  lockWaitMs?: number;
  /** How often a waiter looks again. Default 1 s. */
  lockPollMs?: number;
}

export function managedStateKey(prefix: string, stateProjectId: string): string {
  const p = prefix.replace(/^\/+|\/+$/g, '');
  return `${p ? `${p}/` : ''}${stateProjectId}/terraform.tfstate`;
}

/** The block types `declaresBackend` looks for, as words. */
const BACKEND_WORD = /\b(?:backend|cloud)\b/;

/**
 * Whether the root module's own files (not its modules', which cannot carry one) declare a
 * `backend` or `cloud` block, in `.tf` or `.tf.json` form. Kumoss's own override file is not counted.
 */
export async function declaresBackend(iacDir: string): Promise<boolean> {
  for (const f of readdirSync(iacDir).sort()) {
    if (f === MANAGED_BACKEND_FILE) continue;
    const text = () => readFileSync(join(iacDir, f), 'utf8');
    if (f.endsWith('.tf.json')) {
      let doc: unknown;
      try {
        doc = JSON.parse(text());
      } catch {
        continue; // the engine reports a broken file itself
      }
      const blocks = (doc as { terraform?: unknown }).terraform;
      for (const b of Array.isArray(blocks) ? blocks : [blocks]) {
        if (b && typeof b === 'object' && ('backend' in b || 'cloud' in b)) return true;
      }
    } else if (f.endsWith('.tf')) {
      const source = text();
      // Only a file that holds the word can declare the block: the others are not parsed (a root's
      // files are most of its size, and this runs before the round's first engine call).
      if (!BACKEND_WORD.test(source)) continue;
      const declares = await withHcl(source, (root) =>
        topBlocks(root).some(
          (block) =>
            blockLabels(block).kind === 'terraform' &&
            blockNodes(bodyOf(block)).some((b) => ['backend', 'cloud'].includes(blockLabels(b).kind)),
        ),
      );
      if (declares) return true;
    }
  }
  return false;
}

/**
 * The git directory of the checkout holding `dir` (activities/sandbox.ts: checkoutOf), when it is
 * a directory there; a worktree's `.git` is a file, and its checkout has none of its own.
 */
function gitDirOf(dir: string): string | undefined {
  const checkout = checkoutOf(dir);
  if (!checkout) return undefined;
  const gitDir = join(checkout, '.git');
  return lstatSync(gitDir).isDirectory() ? gitDir : undefined;
}

/** What the engine client does for one root whose state Kumoss manages. */
export interface ManagedRoot {
  stateProjectId: string;
  key: string;
  /** Puts the override file back if it is missing (a reset of the checkout removes it). */
  ensureOverride(): void;
  /**
   * Runs `fn` with the engine's `TF_HTTP_*` environment: a grant on this state that ends when `fn`
   * does (writes allowed only under `lease`).
   */
  withGrant<T>(lease: Lease | undefined, fn: (env: Record<string, string>) => Promise<T>): Promise<T>;
  /** Runs `fn` holding the state's lease. */
  hold<T>(operation: string, hooks: LeaseHooks, fn: (lease: Lease) => Promise<T>): Promise<T>;
}

/** A lease held by one engine call. */
export interface Lease {
  /** Aborted when the lease is lost (a renewal found another holder, or none succeeded in time). */
  signal: AbortSignal;
  /** Whether the metadata store still names this call as the holder. */
  holds(): Promise<boolean>;
}

export interface LeaseHooks {
  signal?: AbortSignal;
  heartbeat?: (detail: string) => void;
}

/** A call that waited the whole lock wait: retried (the holder may be a long apply). */
export class StateLockTimeout extends Error {
  override name = 'StateLockTimeout';
}

/** The lease was lost while its engine ran: the engine was stopped. */
export class StateLeaseLost extends Error {
  override name = 'StateLeaseLost';
}

export class ManagedState {
  /** Serves the states to the engine (started on the first engine call that needs it). */
  readonly server: StateServer;

  constructor(
    readonly cfg: ManagedStateConfig,
    private readonly db: Db,
  ) {
    const s3 = createS3Client({
      endpoint: cfg.endpoint,
      bucket: cfg.bucket,
      region: cfg.region,
      accessKeyId: cfg.accessKeyId,
      secretAccessKey: cfg.secretAccessKey,
    });
    this.server = new StateServer({
      s3,
      bucket: cfg.bucket,
      key: (id) => managedStateKey(cfg.prefix, id),
    });
  }

  /**
   * The managed root for `iacDir`, or undefined when the root declares its own backend (its state
   * is the root's business and the engine's own lock guards it).
   */
  async forRoot(iacDir: string, stateProjectId: string): Promise<ManagedRoot | undefined> {
    if (await declaresBackend(iacDir)) return undefined;
    const key = managedStateKey(this.cfg.prefix, stateProjectId);
    const gitDir = gitDirOf(iacDir);
    const ensureOverride = () => {
      const file = join(iacDir, MANAGED_BACKEND_FILE);
      // Only a file of its own: a symbolic link put there (committed, or by the engine) is removed,
      // never written through.
      const st = lstatSync(file, { throwIfNoEntry: false });
      if (st && !st.isFile()) rmSync(file, { recursive: true, force: true });
      if (!st?.isFile()) writeFileSync(file, BACKEND_BLOCK, { flag: 'wx' });
      if (!gitDir) return;
      const exclude = join(gitDir, 'info', 'exclude');
      const current = existsSync(exclude) ? readFileSync(exclude, 'utf8') : '';
      if (!current.split('\n').includes(MANAGED_BACKEND_FILE)) {
        if (!existsSync(dirname(exclude))) return;
        appendFileSync(exclude, `${current && !current.endsWith('\n') ? '\n' : ''}${MANAGED_BACKEND_FILE}\n`);
      }
    };
    ensureOverride();
    return {
      stateProjectId,
      key,
      ensureOverride,
      withGrant: async (lease, fn) => {
        const grant = await this.server.grant(stateProjectId, lease);
        try {
          return await fn(grant.env);
        } finally {
          grant.revoke();
        }
      },
      hold: (operation, hooks, fn) => this.hold(stateProjectId, operation, hooks, fn),
    };
  }

  /**
   * Runs `fn` holding the lease of `stateProjectId`: waits (heartbeating what holds it) while
   * another holder's unexpired lease stands, renews it while `fn` runs, and releases it after.
   */
  async hold<T>(
    stateProjectId: string,
    operation: string,
    hooks: LeaseHooks,
    fn: (lease: Lease) => Promise<T>,
  ): Promise<T> {
    const ttl = this.cfg.lockTtlMs ?? 30_000;
    const wait = this.cfg.lockWaitMs ?? 10 * 60_000;
    const poll = this.cfg.lockPollMs ?? 1000;
    const holder = randomUUID();
    const what = `${operation} (worker ${hostname()}:${process.pid})`;
    const deadline = Date.now() + wait;
    for (;;) {
      const attempt = await tryAcquireStateLock(this.db, stateProjectId, holder, what, ttl);
      if (attempt.acquired) break;
      if (Date.now() >= deadline) {
        throw new StateLockTimeout(
          `The state is locked by ${attempt.operation}; waited ${Math.round(wait / 1000)} s for it`,
        );
      }
      hooks.heartbeat?.(`waiting for the state lock held by ${attempt.operation}`);
      await sleep(poll, undefined, hooks.signal ? { signal: hooks.signal } : {});
    }
    // Renewed every third of its life. A renewal that finds another holder, or no renewal that
    // succeeds for half its life (the store unreachable), aborts the call: its engine process group
    // is stopped (SIGTERM, SIGKILL 5 s later) before the lease can expire and be taken by another.
    const lost = new AbortController();
    let renewed = Date.now();
    const loseLease = (why: string) => {
      if (!lost.signal.aborted)
        lost.abort(new StateLeaseLost(`The state lease of ${operation} was lost: ${why}`));
    };
    const renew = setInterval(
      () => {
        renewStateLock(this.db, stateProjectId, holder, ttl).then(
          (held) => {
            if (held) renewed = Date.now();
            else loseLease('another holder took it');
          },
          (err: Error) => {
            if (Date.now() - renewed > ttl / 2)
              loseLease(`no renewal for ${Date.now() - renewed} ms (${err.message})`);
          },
        );
      },
      Math.max(50, Math.floor(ttl / 3)),
    );
    renew.unref();
    const onCancel = () => lost.abort(hooks.signal?.reason);
    hooks.signal?.addEventListener('abort', onCancel, { once: true });
    try {
      return await fn({
        signal: lost.signal,
        holds: async () =>
          !lost.signal.aborted &&
          (await currentStateLockHolder(this.db, stateProjectId).catch(() => undefined)) === holder,
      });
    } catch (err) {
      if (lost.signal.reason instanceof StateLeaseLost) throw lost.signal.reason;
      throw err;
    } finally {
      clearInterval(renew);
      hooks.signal?.removeEventListener('abort', onCancel);
      await releaseStateLock(this.db, stateProjectId, holder).catch(() => undefined);
    }
  }
}
