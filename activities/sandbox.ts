// The engine's sandbox (issue 26 item 3). A Terraform root is code Kumoss did not write: its
// plan-time functions (`file`, `fileset`, `filebase64`, `pathexpand`) and its provisioners run as
// the engine process. Under bubblewrap that process sees only what the run needs — the run's own
// directory read-write (the checkout and its plan files), the engine binaries, the CLI config and
// the provider mirror read-only, the system's programs and libraries read-only, a private `/tmp`,
// its own `/proc` (own pid namespace, so `/proc/self/environ` is the clean environment it was
// given) — and nothing else of the machine: no other checkout, no `.kumoss/`, no tool cache, no
// worker files, no home directory. The network is shared: providers and the state backend need it.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';

export type SandboxMode = 'bubblewrap' | 'off';

/** HOME inside the sandbox. */
export const SANDBOX_HOME = '/home';

export interface SandboxOptions {
  mode: SandboxMode;
  /** The bubblewrap binary (default: `bwrap` on PATH). */
  bwrap?: string;
  /** Files and directories every engine process may read (binaries, CLI config, provider mirror). */
  readOnly: string[];
  /** Directories every engine process may write besides its own run directory (tests' fault wrappers). */
  readWrite?: string[];
}

/** What an engine process of one call gets. */
export interface SandboxCall {
  /** The run's directory: read-write (the checkout, its plans). */
  root: string;
  /** The working directory (inside `root`). */
  cwd: string;
  /** Further files this call reads (a `-backend-config` file written outside the run's directory). */
  readOnly?: string[];
  /** The whole environment of the process: nothing of the worker's is inherited. */
  env: Record<string, string>;
}

/** A sandbox that cannot run: every engine call is refused with this reason. */
export class SandboxUnavailable extends Error {
  override name = 'SandboxUnavailable';
}

/** System directories the engine and the programs it starts (provisioners' `sh`) need, read-only. */
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** Of /etc, only name resolution and the CA certificates. */
const ETC = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
];

/** bubblewrap's arguments for the system directories: merged-/usr links stay links. */
function systemArgs(): string[] {
  const args: string[] = [];
  for (const p of [...SYSTEM, ...ETC]) {
    if (!existsSync(p)) continue;
    const st = lstatSync(p);
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(p), p);
    else args.push('--ro-bind', p, p);
  }
  return args;
}

export class EngineSandbox {
  private probed?: { ok: true } | { ok: false; reason: string };

  constructor(readonly opts: SandboxOptions) {}

  get mode(): SandboxMode {
    return this.opts.mode;
  }

  /** The command line that runs `command args…` in the sandbox for `call`. */
  wrap(command: string, args: string[], call: SandboxCall): { command: string; args: string[] } {
    const bw: string[] = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--hostname',
      'kumoss-engine',
      '--cap-drop',
      'ALL',
      '--clearenv',
      ...systemArgs(),
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '--tmpfs',
      '/tmp',
      // The engine's home (HOME): empty and private, apart from /tmp where run directories may live.
      '--tmpfs',
      SANDBOX_HOME,
    ];
    for (const p of new Set([command, ...this.opts.readOnly, ...(call.readOnly ?? [])])) {
      if (existsSync(p)) bw.push('--ro-bind', p, p);
    }
    for (const p of new Set([...(this.opts.readWrite ?? []), call.root])) bw.push('--bind', p, p);
    for (const [k, v] of Object.entries(call.env)) bw.push('--setenv', k, v);
    bw.push('--chdir', call.cwd, '--', command, ...args);
    return { command: this.opts.bwrap ?? 'bwrap', args: bw };
  }

  /**
   * Whether the sandbox runs on this machine (bubblewrap installed, namespaces allowed): asked
   * once per process. `off` is always "ready".
   */
  check(): { ok: true } | { ok: false; reason: string } {
    if (this.opts.mode === 'off') return { ok: true };
    if (this.probed) return this.probed;
    const probe = this.wrap('/bin/sh', ['-c', 'test ! -e /etc/passwd'], {
      root: '/tmp',
      cwd: '/tmp',
      env: {},
    });
    const r = spawnSync(probe.command, probe.args, { encoding: 'utf8', timeout: 10_000 });
    if (r.error) {
      const missing = (r.error as NodeJS.ErrnoException).code === 'ENOENT';
      this.probed = {
        ok: false,
        reason: missing
          ? `bubblewrap (${probe.command}) is not installed — on Debian: apt-get install bubblewrap`
          : `bubblewrap (${probe.command}) did not run: ${r.error.message}`,
      };
    } else if (r.status !== 0) {
      this.probed = {
        ok: false,
        reason: `bubblewrap cannot run here (exit ${r.status}): ${(r.stderr || r.stdout).trim().slice(0, 300)}`,
      };
    } else this.probed = { ok: true };
    return this.probed;
  }

  /** Throws `SandboxUnavailable` when the sandbox is on but cannot run. */
  assertReady(): void {
    const c = this.check();
    if (!c.ok)
      throw new SandboxUnavailable(
        `The engine sandbox cannot run on this worker, so no engine process is started: ${c.reason}. ` +
          "Install bubblewrap, or set engine.sandbox: off to run repositories' code unconfined (see the README's threat model).",
      );
  }

  /** One line for logs, the worker's identity and /health. */
  describe(): string {
    if (this.opts.mode === 'off') return 'off';
    const c = this.check();
    return c.ok ? 'bubblewrap' : 'unavailable';
  }
}
