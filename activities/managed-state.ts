// Kumoss-managed state (issue 16; seed 001: the state project id is used "when Kumoss manages
// state"). A root module that declares no backend would keep its state in the checkout, which is a
// worker's scratch copy: lost with it, and never seen by the next worker. Such a root gets an S3
// backend on the configured object store instead, under `<prefix>/<state project id>/terraform.tfstate`,
// so every worker's plan and apply read and write one state, and a lease per state project id in the
// metadata store (shared/db/state-locks.ts) lets one engine call at a time touch it — the S3 backend
// of the pinned engines locks only through DynamoDB, which an S3-compatible store does not have.
//
// How: an override file (never committed: the checkout's .git/info/exclude names it, and the
// configuration readers skip it) adds `backend "s3" {}`; init gets the bucket, key, endpoint and
// the store's credentials as a `-backend-config` file written outside the checkout (mode 0600) and
// removed after init. The engine keeps that configuration in the checkout's `.terraform/` as it
// does for any backend; it never reaches an argument list, a log or an artifact.
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../shared/db';
import { releaseStateLock, renewStateLock, tryAcquireStateLock } from '../shared/db/state-locks';
import { blockLabels, hclString, parseHcl, topBlocks } from './hcl';
import { blockNodes, bodyOf } from './terraform-config';

/** The override file that gives a root without a backend Kumoss's S3 backend. */
export const MANAGED_BACKEND_FILE = 'kumoss_managed_state_override.tf';

const BACKEND_BLOCK = `# Written by Kumoss for this checkout only (Kumoss-managed state); never committed.
terraform {
  backend "s3" {}
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
      for (const block of topBlocks(await parseHcl(text()))) {
        if (blockLabels(block).kind !== 'terraform') continue;
        if (blockNodes(bodyOf(block)).some((b) => ['backend', 'cloud'].includes(blockLabels(b).kind)))
          return true;
      }
    }
  }
  return false;
}

/** The `-backend-config` file for the engine: attribute names differ between the pinned engines. */
export function backendConfig(kind: 'terraform' | 'tofu', cfg: ManagedStateConfig, key: string): string {
  const common: [string, string | boolean][] = [
    ['bucket', cfg.bucket],
    ['key', key],
    ['region', cfg.region],
    ['access_key', cfg.accessKeyId],
    ['secret_key', cfg.secretAccessKey],
    ['skip_credentials_validation', true],
    ['skip_metadata_api_check', true],
    ['skip_region_validation', true],
  ];
  // terraform 1.5 (aws-sdk-go v1): `endpoint` and `force_path_style`; tofu 1.6 (aws-sdk-go-v2):
  // `endpoints.s3` and `use_path_style`, and it asks STS for the account unless told not to.
  const own: [string, string | boolean][] =
    kind === 'terraform'
      ? [
          ['endpoint', cfg.endpoint],
          ['force_path_style', true],
        ]
      : [
          ['use_path_style', true],
          ['skip_requesting_account_id', true],
        ];
  const lines = [...common, ...own].map(
    ([k, v]) => `${k} = ${typeof v === 'string' ? hclString(v) : String(v)}`,
  );
  if (kind === 'tofu') lines.push(`endpoints = { s3 = ${hclString(cfg.endpoint)} }`);
  return `${lines.join('\n')}\n`;
}

/** The checkout holding `dir` (the nearest directory up with a `.git` directory), if any. */
function gitDirOf(dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, '.git', 'info')) || existsSync(join(d, '.git', 'HEAD'))) return join(d, '.git');
    if (dirname(d) === d) return undefined;
  }
}

/** What the engine client does for one root whose state Kumoss manages. */
export interface ManagedRoot {
  stateProjectId: string;
  key: string;
  /** Puts the override file back if it is missing (a reset of the checkout removes it). */
  ensureOverride(): void;
  /** Runs `fn` with the path of a `-backend-config` file that exists only during the call. */
  withBackendConfig<T>(fn: (file: string) => Promise<T>): Promise<T>;
  /** Runs `fn` holding the state's lease. */
  hold<T>(operation: string, hooks: LeaseHooks, fn: () => Promise<T>): Promise<T>;
}

export interface LeaseHooks {
  signal?: AbortSignal;
  heartbeat?: (detail: string) => void;
}

/** A call that waited the whole lock wait: retried (the holder may be a long apply). */
export class StateLockTimeout extends Error {
  override name = 'StateLockTimeout';
}

export class ManagedState {
  constructor(
    readonly cfg: ManagedStateConfig,
    private readonly db: Db,
  ) {}

  /**
   * The managed root for `iacDir`, or undefined when the root declares its own backend (its state
   * is the root's business and the engine's own lock guards it).
   */
  async forRoot(
    iacDir: string,
    stateProjectId: string,
    kind: 'terraform' | 'tofu',
  ): Promise<ManagedRoot | undefined> {
    if (await declaresBackend(iacDir)) return undefined;
    const key = managedStateKey(this.cfg.prefix, stateProjectId);
    const gitDir = gitDirOf(iacDir);
    const ensureOverride = () => {
      const file = join(iacDir, MANAGED_BACKEND_FILE);
      if (!existsSync(file)) writeFileSync(file, BACKEND_BLOCK);
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
      withBackendConfig: async (fn) => {
        const dir = mkdtempSync(join(tmpdir(), 'kumoss-state-'));
        const file = join(dir, 'backend.tfbackend');
        try {
          writeFileSync(file, backendConfig(kind, this.cfg, key), { mode: 0o600 });
          return await fn(file);
        } finally {
          rmSync(dir, { recursive: true, force: true });
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
    fn: () => Promise<T>,
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
    const renew = setInterval(
      () => {
        renewStateLock(this.db, stateProjectId, holder, ttl).catch(() => undefined);
      },
      Math.max(50, Math.floor(ttl / 3)),
    );
    renew.unref();
    try {
      return await fn();
    } finally {
      clearInterval(renew);
      await releaseStateLock(this.db, stateProjectId, holder).catch(() => undefined);
    }
  }
}
