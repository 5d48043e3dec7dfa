// Round workspaces: one checkout of the session branch per round on this worker, with the engine
// client built for that run — the client carries the "init ran" flag, so init is submitted at most
// once per round (plus the re-inits the engine asks for). A workspace lost to a restart or found
// on another worker is rebuilt from the pushed branch: every cycle pushes before it returns.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, normalize, relative, sep } from 'node:path';
import type { ExceptionRule } from '../shared/drift-exceptions';
import { EngineClient } from './engine';
import type { EngineDeps } from './drift-detection';
import type { GitClient } from './git';
import { TerraformConfig } from './terraform-config';

/** What every round activity gets: which round, which repository, which root. */
export interface RoundRef {
  sessionId: string;
  roundId: string;
  repositoryUrl: string;
  /** Root module inside the repository; '' or '.' for the top. */
  iacPath: string;
  scopeId: string;
  cloud: 'azure' | 'gcp' | 'aws' | 'oci' | 'kubernetes';
  /** The session branch the round commits to. */
  branch: string;
  /** Branch the session branch starts from (default: the repository's default branch). */
  baseBranch?: string;
  engine?: 'terraform' | 'tofu';
  /** Exception rules in force for the round (loaded once, at its start). */
  rules?: ExceptionRule[];
}

export interface Workspace {
  dir: string;
  iacDir: string;
  engine: EngineClient;
}

/** A checkout untouched this long belongs to a round that ended elsewhere or failed: removed. */
export const STALE_CHECKOUT_MS = 24 * 60 * 60 * 1000;

export class RoundWorkspaces {
  private readonly open = new Map<string, Workspace>();
  private lastSweep = 0;

  constructor(
    private readonly root: string,
    private readonly git: GitClient,
    private readonly engines: Record<'terraform' | 'tofu', EngineDeps>,
    private readonly defaultEngine: 'terraform' | 'tofu',
  ) {}

  private key(ref: RoundRef): string {
    return `${ref.sessionId}/${ref.roundId}`;
  }

  /**
   * Removes checkouts no round of this worker holds that were last touched more than `maxAgeMs`
   * ago (a failed round, a round finished on another worker). Returns the directories removed.
   */
  sweep(maxAgeMs = STALE_CHECKOUT_MS, now = Date.now()): string[] {
    const removed: string[] = [];
    const held = new Set([...this.open.values()].map((w) => w.dir));
    if (!existsSync(this.root)) return removed;
    for (const session of readdirSync(this.root)) {
      const sessionDir = join(this.root, session);
      if (!statSync(sessionDir).isDirectory()) continue;
      for (const round of readdirSync(sessionDir)) {
        const dir = join(sessionDir, round);
        if (held.has(dir)) continue;
        const touched = Math.max(
          statSync(dir).mtimeMs,
          statSync(join(dir, '.git', 'index'), { throwIfNoEntry: false })?.mtimeMs ?? 0,
        );
        if (now - touched > maxAgeMs) {
          rmSync(dir, { recursive: true, force: true });
          removed.push(dir);
        }
      }
      if (readdirSync(sessionDir).length === 0) rmSync(sessionDir, { recursive: true, force: true });
    }
    return removed;
  }

  /** The round's checkout, cloned (or re-cloned) when this worker has none. */
  async get(ref: RoundRef): Promise<Workspace> {
    if (Date.now() - this.lastSweep > 60 * 60 * 1000) {
      this.lastSweep = Date.now();
      this.sweep();
    }
    const key = this.key(ref);
    const known = this.open.get(key);
    if (known && existsSync(join(known.dir, '.git'))) return known;
    const dir = join(
      this.root,
      ref.sessionId.replace(/[^A-Za-z0-9_-]/g, '_'),
      ref.roundId.replace(/[^A-Za-z0-9_-]/g, '_'),
    );
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, '..'), { recursive: true });
    await this.git.checkout({ url: ref.repositoryUrl, dir, branch: ref.branch, base: ref.baseBranch });
    const iacDir = resolveIacDir(dir, ref.iacPath);
    if (!existsSync(iacDir))
      throw new Error(`IaC path ${ref.iacPath} does not exist in ${ref.repositoryUrl}`);
    const deps = this.engines[ref.engine ?? this.defaultEngine];
    const ws = { dir, iacDir, engine: new EngineClient({ ...deps, workdir: iacDir, scopeId: ref.scopeId }) };
    this.open.set(key, ws);
    return ws;
  }

  release(ref: RoundRef): void {
    const ws = this.open.get(this.key(ref));
    this.open.delete(this.key(ref));
    if (ws) rmSync(ws.dir, { recursive: true, force: true });
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
    for (const f of readdirSync(abs).sort()) {
      if (!CONFIG_FILE.test(f)) continue;
      const path = (rel ? `${rel}/${f}` : f).split(sep).join('/');
      out.set(path.replace(/^\.\//, ''), readFileSync(join(abs, f), 'utf8'));
    }
    return out;
  });
  return [...config.files].map(([path, content]) => ({ path, content }));
}
