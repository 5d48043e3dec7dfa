// The engine's sandbox. A Terraform root is code Kumoss did not write: its plan-time functions
// (`file`, `fileset`, `filebase64`, `pathexpand`) and its provisioners run as the engine process.
// Under bubblewrap that process sees only what the run needs — the run's own directories read-write
// (the checkout and its plan files) but the checkout's git metadata (`.git/`, read-only: a hook or
// a config entry written there would run in the worker's next git call, outside the sandbox), the
// engine binaries, the CLI config and the provider mirror read-only, the system's programs and
// libraries read-only, a private `/tmp`, its own `/proc` (own pid namespace, so
// `/proc/self/environ` is the clean environment it was given) — and nothing else of the machine: no
// other checkout, no `.kumoss/`, no tool cache, no worker files, no home directory. Its arguments
// and environment reach bubblewrap through a pipe (`--args 3`), never its command line, which
// every process of the machine can read in `/proc/<pid>/cmdline`.
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { EGRESS_DIR_IN_SANDBOX, parseEgressAllow, type EgressListener, type EgressRules } from './egress';

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
  /**
   * The engine's own network (activities/egress.ts): every process in a network namespace of its
   * own, reaching out only through the relay (worker/egress-relay) to the worker's egress gate.
   * Absent: the engine shares the worker's network (`engine.network: shared`).
   */
  network?: {
    /** The relay binary (kumoss-egress-relay). */
    relay: string;
    /** What every run may reach besides its own destinations (`engine.egress_allow`), read at each call. */
    allow?: () => string[];
  };
}

/** What an engine process of one call gets. */
export interface SandboxCall {
  /** The run's directories: read-write (the checkout, its plans). */
  writable: string[];
  /**
   * Paths inside those bound read-only over them (the checkout's `.git`, a directory or a
   * worktree's file): what the engine writes is never run by the worker's git.
   */
  protect?: string[];
  /** The working directory (inside `root`). */
  cwd: string;
  /** Further files this call reads (a `-backend-config` file written outside the run's directory). */
  readOnly?: string[];
  /** The whole environment of the process: nothing of the worker's is inherited. */
  env: Record<string, string>;
  /** The egress gate's socket directory and the listeners the relay opens inside the namespace. */
  egress?: { dir: string; listeners: EgressListener[] };
}

/**
 * The checkout holding `dir`: the nearest directory at or above it with a `.git` entry (a
 * directory, or a worktree's file naming its git directory).
 */
export function checkoutOf(dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    if (lstatSync(join(d, '.git'), { throwIfNoEntry: false })) return d;
    if (dirname(d) === d) return undefined;
  }
}

/**
 * What an engine process must not write of the git metadata it can reach: the checkout's `.git`
 * and that of every checkout directly inside the run's directory (a worktree's `.git` file names
 * the git directory its commands read).
 */
export function gitMetadataOf(checkout: string, runDir?: string): string[] {
  const out = [join(checkout, '.git')];
  if (runDir && existsSync(runDir))
    for (const e of readdirSync(runDir, { withFileTypes: true }))
      if (e.isDirectory() && lstatSync(join(runDir, e.name, '.git'), { throwIfNoEntry: false }))
        out.push(join(runDir, e.name, '.git'));
  return out;
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

  /** What the configuration lets every run's engine reach (`engine.egress_allow`). */
  egressAllowed(): EgressRules {
    return parseEgressAllow(this.opts.network?.allow?.() ?? []);
  }

  /** Whether each engine process gets a network namespace of its own. */
  get isolatesNetwork(): boolean {
    return this.opts.mode !== 'off' && Boolean(this.opts.network);
  }

  /**
   * What runs `command args…` in the sandbox for `call`: bubblewrap's command line (`--args 3`,
   * then the command) and the NUL-separated options to write on its descriptor 3 — the binds and
   * the environment, which no other process of the machine may read.
   */
  wrap(command: string, args: string[], call: SandboxCall): { command: string; args: string[]; fd3: string } {
    const bw: string[] = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      ...(this.isolatesNetwork ? ['--unshare-net'] : []),
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
    for (const p of new Set([...(this.opts.readWrite ?? []), ...call.writable])) bw.push('--bind', p, p);
    // After the writable binds, so that the read-only one is what the engine sees there.
    for (const p of new Set(call.protect ?? [])) if (existsSync(p)) bw.push('--ro-bind', p, p);
    for (const [k, v] of Object.entries(call.env)) bw.push('--setenv', k, v);
    // The engine's way out of its network namespace: the relay listens inside, then runs the command.
    const relay = this.opts.network?.relay;
    const egress = this.isolatesNetwork && relay && call.egress?.listeners.length ? call.egress : undefined;
    if (egress && relay) bw.push('--ro-bind', egress.dir, EGRESS_DIR_IN_SANDBOX, '--ro-bind', relay, relay);
    bw.push('--chdir', call.cwd);
    for (const a of bw)
      if (a.includes('\0')) throw new SandboxUnavailable('a sandbox setting holds a NUL character');
    // bubblewrap takes its options from the descriptor and the command from its command line (the
    // relay's listeners are addresses and socket names: nothing secret).
    const run =
      egress && relay
        ? [
            relay,
            ...egress.listeners.flatMap((l) => ['-l', `${l.address}=${l.socket}`]),
            '--',
            command,
            ...args,
          ]
        : [command, ...args];
    return {
      command: this.opts.bwrap ?? 'bwrap',
      args: ['--args', '3', '--', ...run],
      fd3: `${bw.join('\0')}\0`,
    };
  }

  /**
   * Whether the sandbox runs on this machine (bubblewrap installed, namespaces allowed): asked
   * once per process. `off` is always "ready".
   */
  check(): { ok: true } | { ok: false; reason: string } {
    if (this.opts.mode === 'off') return { ok: true };
    if (this.probed) return this.probed;
    const relay = this.opts.network?.relay;
    if (relay && !existsSync(relay))
      return (this.probed = {
        ok: false,
        reason: `the engine's egress relay is not built (${relay}; \`npm run setup\` builds it)`,
      });
    const probe = this.wrap('/bin/sh', ['-c', 'test ! -e /etc/passwd'], {
      writable: ['/tmp'],
      cwd: '/tmp',
      env: {},
    });
    // The probe's arguments hold nothing secret: a file serves as its descriptor 3.
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-bwrap-probe-'));
    const argsFile = join(dir, 'args');
    writeFileSync(argsFile, probe.fd3);
    const fd = openSync(argsFile, 'r');
    let r;
    try {
      r = spawnSync(probe.command, probe.args, {
        encoding: 'utf8',
        timeout: 10_000,
        stdio: ['ignore', 'pipe', 'pipe', fd],
      });
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
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
