// Git over HTTPS: clone a repository, work on the session branch, commit, push — with argument
// arrays and an explicit environment. A host's token travels as an HTTP header bound to that host's
// origin (`http.<origin>/.extraHeader`, through GIT_CONFIG_* environment entries) — never to another
// host, and never in a URL, an argument list or a log line. The embedded
// git host's CA is trusted through GIT_SSL_CAINFO. Every call runs as a process started by this
// process's spawner (activities/process.ts) — a fork of the worker itself costs CPU that grows with
// its memory, ≈ 30 ms a call under the stack detection benchmark — after simple-git's argument
// check (`vulnerabilityCheck`), which refuses options that run programs (`--upload-pack`,
// `-c core.sshCommand=…`, `-c core.fsmonitor=…`); the environment is this client's own (ambient
// GIT_* variables never reach git), and the GIT_CONFIG_COUNT header entries
// (`allowUnsafeConfigEnvCount`) have their keys checked against the same list of unsafe config
// keys. A call that reaches the git host is stopped by git itself when its transfer stalls (under
// 1 KB/s for the client's timeout), with a total of an hour as a backstop.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { vulnerabilityCheck } from '@simple-git/argv-parser';
import { ErrorTypes } from '../shared/errors';
import { runProcess } from './process';

export interface GitOptions {
  /**
   * CA bundle for git hosts (the system's CAs and the embedded host's self-signed CA): when given,
   * git trusts exactly its certificates, not also the system's certificate directory.
   */
  caFile?: string;
  /**
   * Tokens by origin (`https://github.com`, `https://127.0.0.1:3443`), each sent as a basic-auth
   * header to that origin only (scheme, host and port must match). There is no token for "any host":
   * a repository on an origin not named here is fetched without credentials.
   */
  hostTokens?: Record<string, string>;
  author?: { name: string; email: string };
  timeoutMs?: number;
  /** Addresses git connects to (`host:port:address`): the ones a target was checked at. */
  resolve?: string[];
}

export interface CommitResult {
  sha: string;
  /** False when there was nothing to commit (the change was already committed: idempotent). */
  created: boolean;
}

export class GitError extends Error {
  override name = 'GitError';
  constructor(
    message: string,
    readonly stderr: string,
    readonly stdout = '',
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/**
 * Settings every git process of the worker runs with, at the command level (GIT_CONFIG_COUNT),
 * which wins over a repository's `.git/config`: git outside the sandbox runs nothing a repository
 * or the engine could have put in the checkout. The engine cannot write `.git/` (it is read-only in
 * its sandbox); these hold even where it could.
 */
export const UNTRUSTING_CONFIG: [string, string][] = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.sshCommand', 'false'],
  ['core.askPass', ''],
  ['core.pager', 'cat'],
  ['core.editor', 'true'],
  ['credential.helper', ''],
  ['protocol.allow', 'never'],
  ['protocol.https.allow', 'always'],
  ['protocol.file.allow', 'always'],
  ['http.followRedirects', 'false'],
  ['submodule.recurse', 'false'],
  ['fetch.recurseSubmodules', 'false'],
  ['diff.ignoreSubmodules', 'all'],
];

/** `env` with `entries` added to its GIT_CONFIG_COUNT settings. */
function withConfig(env: Record<string, string>, entries: [string, string][]): Record<string, string> {
  if (entries.length === 0) return env;
  const out = { ...env };
  const at = Number(out.GIT_CONFIG_COUNT ?? 0);
  entries.forEach(([key, value], i) => {
    out[`GIT_CONFIG_KEY_${at + i}`] = key;
    out[`GIT_CONFIG_VALUE_${at + i}`] = value;
  });
  out.GIT_CONFIG_COUNT = String(at + entries.length);
  return out;
}

/** Verbs that talk to the git host: stopped when the transfer stalls, not after a short total. */
const REMOTE_VERBS = new Set(['clone', 'fetch', 'push', 'pull', 'ls-remote']);

/** A remote call's total, beside git's own stall detection. */
const REMOTE_TOTAL_MS = 60 * 60 * 1000;

/**
 * Which branch to work on, chosen from the remote's branches (name → sha) as the clone or fetch
 * just brought them: no separate `ls-remote` trip to the host. It throws when none will do.
 */
export type BranchChoice = (remote: Map<string, string>) => string;

/** Whether a commit message holds `marker` as a line of its own. */
export function hasMarkerLine(message: string, marker: string): boolean {
  return message.split('\n').some((line) => line.trim() === marker);
}

export class GitClient {
  constructor(private readonly opts: GitOptions = {}) {}

  /**
   * This client's settings with these tokens instead of its own (none: no credential at all), and
   * connecting to the addresses `resolve` names (`host:port:address`, libcurl's form).
   */
  withHostTokens(hostTokens: Record<string, string>, resolve: string[] = []): GitClient {
    return new GitClient({ ...this.opts, hostTokens, resolve });
  }

  env(): Record<string, string> {
    const author = this.opts.author ?? { name: 'Kumoss', email: 'kumoss@localhost' };
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      GIT_TERMINAL_PROMPT: '0',
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_COMMITTER_NAME: author.name,
      GIT_COMMITTER_EMAIL: author.email,
    };
    if (this.opts.caFile) {
      env.GIT_SSL_CAINFO = this.opts.caFile;
      // Exactly this bundle. Without an empty CA path, curl also reads every file of the system's
      // certificate directory on each call to a host (434 certificates on Debian, two thirds of a
      // warm fetch's CPU) — certificates the bundle already holds, or ones nobody chose to trust.
      env.GIT_SSL_CAPATH = '';
    }
    const header = (token: string) =>
      `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
    const entries: [string, string][] = [];
    for (const [origin, token] of Object.entries(this.opts.hostTokens ?? {})) {
      entries.push([`http.${new URL(origin).origin}/.extraHeader`, header(token)]);
    }
    for (const r of this.opts.resolve ?? []) entries.push(['http.curloptResolve', r]);
    return withConfig(env, entries);
  }

  /**
   * The whole environment of a git process of this client run in `cwd`: {@link env}, and git
   * trusting nothing a repository's code could have written — no system or user config, no
   * attributes of the system, command-level settings that win over the repository's own config
   * (no hook, no fsmonitor, no credential helper, no submodule entered, only https and local
   * repositories, no redirect followed), no editor or password program, and no look for a `.git`
   * above `cwd` (a directory the engine writes could hold one).
   */
  processEnv(cwd?: string, extra: Record<string, string> = {}): Record<string, string> {
    const env = withConfig({ ...this.env(), ...extra }, UNTRUSTING_CONFIG);
    return {
      ...env,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_ATTR_NOSYSTEM: '1',
      GIT_ASKPASS: '',
      SSH_ASKPASS: '',
      GIT_EDITOR: 'true',
      GIT_SEQUENCE_EDITOR: 'true',
      GIT_PAGER: 'cat',
      GIT_PROTOCOL_FROM_USER: '0',
      ...(cwd ? { GIT_CEILING_DIRECTORIES: dirname(resolve(cwd)) } : {}),
    };
  }

  /**
   * Runs `git args…` in `cwd`; throws GitError with git's own message on failure. A call that
   * reaches the git host is stopped when it has moved less than 1 KB/s for the client's timeout
   * (git's `GIT_HTTP_LOW_SPEED_*`), or after an hour; local plumbing after the timeout.
   */
  async run(args: string[], cwd?: string): Promise<string> {
    const blockMs = this.opts.timeoutMs ?? 5 * 60 * 1000;
    if (!args.some((a) => REMOTE_VERBS.has(a))) return this.exec(args, cwd, blockMs);
    return this.exec(args, cwd, REMOTE_TOTAL_MS, {
      GIT_HTTP_LOW_SPEED_LIMIT: '1000',
      GIT_HTTP_LOW_SPEED_TIME: String(Math.max(1, Math.round(blockMs / 1000))),
    });
  }

  private async exec(
    args: string[],
    cwd: string | undefined,
    timeoutMs: number,
    extraEnv: Record<string, string> = {},
  ): Promise<string> {
    // The check is of the arguments (they carry refs, URLs and paths from requests) with the
    // credential entries; the settings processEnv adds are this client's own.
    const checked = { ...this.env(), ...extraEnv };
    const allowed: Partial<Record<string, boolean>> = {
      allowUnsafeConfigEnvCount: checked.GIT_CONFIG_COUNT !== undefined,
    };
    const refused = vulnerabilityCheck(args, checked).find((v) => allowed[v.category] !== true);
    if (refused) throw new GitError(`git ${args[0]} refused: ${refused.message}`, '');
    const dir = cwd ?? tmpdir();
    const r = await runProcess('git', args, {
      cwd: dir,
      env: this.processEnv(dir, extraEnv),
      timeoutMs,
      maxOutputBytes: 256 * 1024 * 1024,
    });
    if (r.exitCode !== 0) {
      const msg = r.stderr.trim().split('\n').filter(Boolean).pop() ?? `exit code ${r.exitCode}`;
      throw new GitError(`git ${args[0]} failed: ${msg}`, r.stderr, r.stdout, r.exitCode);
    }
    return r.stdout;
  }

  /** Remote branches of a repository (`git ls-remote --heads`), name → sha. */
  async remoteBranches(url: string): Promise<Map<string, string>> {
    const out = await this.run(['ls-remote', '--heads', url]);
    const branches = new Map<string, string>();
    for (const line of out.split('\n')) {
      const [sha, ref] = line.trim().split(/\s+/);
      if (sha && ref?.startsWith('refs/heads/')) branches.set(ref.slice('refs/heads/'.length), sha);
    }
    return branches;
  }

  /**
   * Clones `url` into `dir` and checks out `branch`: the remote branch when it exists (a later
   * round continues the session branch), else a new branch from `base` (default: remote HEAD).
   * Answers the branch checked out.
   */
  async checkout(opts: {
    url: string;
    dir: string;
    branch: string | BranchChoice;
    base?: string;
  }): Promise<string> {
    mkdirSync(dirname(opts.dir), { recursive: true });
    await this.run(['clone', '--quiet', '--no-tags', opts.url, opts.dir], dirname(opts.dir));
    return this.switchToBranch(opts.dir, opts.branch, opts.base);
  }

  /**
   * Brings an existing checkout of `url` to what a fresh {@link checkout} would give — fetched, on
   * `branch` as the remote has it (or new from `base`), every local change and untracked file gone —
   * keeping the directories named in `keep` (the engine's `.terraform/`). Throws when `dir` is not a
   * checkout of `url`; the caller clones instead.
   */
  async refresh(opts: {
    url: string;
    dir: string;
    branch: string | BranchChoice;
    base?: string;
    keep?: string[];
  }): Promise<string> {
    const origin = (await this.run(['remote', 'get-url', 'origin'], opts.dir)).trim();
    if (origin !== opts.url) throw new GitError(`${opts.dir} is a checkout of another repository`, '');
    await this.run(['fetch', '--quiet', '--no-tags', '--prune', 'origin'], opts.dir);
    const branch = await this.switchToBranch(opts.dir, opts.branch, opts.base, true);
    await this.run(['clean', '-ffdxq', ...(opts.keep ?? []).flatMap((k) => ['-e', k])], opts.dir);
    return branch;
  }

  /**
   * Puts the checkout back to its last commit: tracked files as committed, untracked files gone
   * except `keep` (the engine's `.terraform/`). What an attempt that failed before its commit left
   * behind is not what the next attempt starts from.
   */
  async discardChanges(dir: string, keep: string[] = []): Promise<void> {
    await this.run(['reset', '--hard', '--quiet', 'HEAD'], dir);
    await this.run(['clean', '-ffdq', ...keep.flatMap((k) => ['-e', k])], dir);
  }

  private async switchToBranch(
    dir: string,
    choice: string | BranchChoice,
    base?: string,
    force = false,
  ): Promise<string> {
    // The clone (or fetch) already knows the remote branches: no second trip to the host.
    const out = await this.run(
      ['for-each-ref', '--format=%(objectname) %(refname:strip=3)', 'refs/remotes/origin/'],
      dir,
    );
    const remote = new Map<string, string>();
    for (const line of out.split('\n')) {
      const [sha, name] = line.split(' ');
      if (sha && name && name !== 'HEAD') remote.set(name, sha);
    }
    const branch = typeof choice === 'string' ? choice : choice(remote);
    const f = force ? ['--force'] : [];
    if (remote.has(branch)) {
      await this.run(['checkout', '--quiet', ...f, '-B', branch, `origin/${branch}`], dir);
    } else {
      const from = base ? `origin/${base}` : force ? 'origin/HEAD' : undefined;
      await this.run(
        ['checkout', '--quiet', ...f, force ? '-B' : '-b', branch, ...(from ? [from] : [])],
        dir,
      );
    }
    return branch;
  }

  /**
   * The content of `paths` at `rev`, read by one `git cat-file --batch` process (its requests on
   * standard input); a path missing at `rev` is absent from the answer.
   */
  async readFiles(dir: string, rev: string, paths: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (paths.length === 0) return out;
    const r = await runProcess('git', ['cat-file', '--batch'], {
      cwd: dir,
      env: this.processEnv(dir),
      stdin: paths.map((p) => `${rev}:${p}\n`).join(''),
      stdoutEncoding: 'latin1',
      maxOutputBytes: 256 * 1024 * 1024,
      timeoutMs: this.opts.timeoutMs ?? 5 * 60 * 1000,
    });
    if (r.exitCode !== 0)
      throw new GitError(`git cat-file failed: ${r.stderr.trim()}`, r.stderr, '', r.exitCode);
    // Each answer: `<sha> <type> <size>\n<size bytes>\n`, or `<spec> missing\n`. latin1 keeps one
    // character per byte, so sizes index the text directly.
    let at = 0;
    for (const p of paths) {
      const eol = r.stdout.indexOf('\n', at);
      if (eol < 0) throw new GitError('git cat-file answered fewer objects than asked', r.stderr);
      const header = r.stdout.slice(at, eol);
      at = eol + 1;
      const m = /^[0-9a-f]+ (\w+) (\d+)$/.exec(header);
      if (!m) continue; // missing or ambiguous
      const size = Number(m[2]);
      if (m[1] === 'blob') out.set(p, Buffer.from(r.stdout.slice(at, at + size), 'latin1').toString('utf8'));
      at += size + 1;
    }
    return out;
  }

  /**
   * A three-way merge of one file's text (`git merge-file`): what `base` became in `ours` and in
   * `theirs`, together. Undefined when the two changes overlap or touch (a conflict). The texts are
   * written under `scratch` for the call and removed after.
   */
  async mergeText(scratch: string, ours: string, base: string, theirs: string): Promise<string | undefined> {
    const dir = mkdtempSync(join(scratch, 'kumoss-merge-'));
    try {
      const names = ['ours', 'base', 'theirs'];
      [ours, base, theirs].forEach((t, i) => writeFileSync(join(dir, names[i] as string), t));
      const r = await runProcess('git', ['merge-file', '-p', '--quiet', ...names], {
        cwd: dir,
        env: this.processEnv(dir),
        maxOutputBytes: 64 * 1024 * 1024,
        timeoutMs: this.opts.timeoutMs ?? 5 * 60 * 1000,
      });
      // The exit code is the number of conflicts; a negative one (255 here) is git's own failure.
      if (r.exitCode === 0) return r.stdout;
      if (r.exitCode > 0 && r.exitCode < 128) return undefined;
      throw new GitError(`git merge-file failed: ${r.stderr.trim()}`, r.stderr, r.stdout, r.exitCode);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  async head(dir: string): Promise<string> {
    return (await this.run(['rev-parse', 'HEAD'], dir)).trim();
  }

  /**
   * Commits the working tree, or only `paths` (relative to `dir`) when given: a round commits the
   * files it edited and nothing `init` left beside them (`.terraform/`, a lock file).
   */
  async commitAll(dir: string, message: string, paths?: string[]): Promise<CommitResult> {
    await this.run(paths ? ['add', '--', ...paths] : ['add', '--all'], dir);
    // Nothing staged: `commit` says so and exits 1, and HEAD is the answer (idempotent).
    let nothing = false;
    try {
      await this.run(['commit', '--quiet', '-m', message], dir);
    } catch (err) {
      nothing =
        err instanceof GitError &&
        err.exitCode === 1 &&
        /nothing to commit|nothing added to commit|no changes added/.test(err.stdout);
      if (!nothing) throw err;
    }
    return { sha: await this.head(dir), created: !nothing };
  }

  /**
   * Pushes a cycle's commit, marked in its message by `marker`. When the remote refuses it because
   * the branch moved and what moved it is a commit with the same marker — this cycle's, pushed by an
   * earlier attempt whose worker died while its `git push` was still on its way — that commit is
   * adopted (the checkout reset to it) and its sha returned: the cycle stays committed once. A move
   * by anyone else stays the permanent refusal `push` gives.
   */
  async pushCycle(dir: string, branch: string, marker: string): Promise<string | undefined> {
    try {
      await this.push(dir, branch);
      return undefined;
    } catch (err) {
      if (!(err instanceof ApplicationFailure) || err.type !== ErrorTypes.BranchMoved) throw err;
      await this.run(['fetch', '--verbose', '--no-tags', 'origin', branch], dir);
      const theirs = (await this.commitsByMarker(dir, [marker], `origin/${branch}`)).get(marker);
      if (!theirs) throw err;
      await this.run(['reset', '--hard', '--quiet', `origin/${branch}`], dir);
      return theirs;
    }
  }

  /**
   * The newest commit of `rev` (default HEAD) whose message holds each marker as a line of its own
   * (a step's marker may be the start of another's: group 1's of group 10's), by marker; one `git log`.
   */
  async commitsByMarker(dir: string, markers: string[], rev?: string): Promise<Map<string, string>> {
    const logged = (
      await this.run(
        ['log', '-F', ...markers.map((m) => `--grep=${m}`), '--format=%H%x00%B%x00', ...(rev ? [rev] : [])],
        dir,
      )
    ).split('\0');
    const found = new Map<string, string>();
    for (let i = 0; i + 1 < logged.length; i += 2) {
      const body = logged[i + 1] ?? '';
      for (const m of markers)
        if (!found.has(m) && hasMarkerLine(body, m)) found.set(m, (logged[i] ?? '').trim());
    }
    return found;
  }

  /**
   * Pushes `branch`; pushing a commit the remote already has is a no-op. A push the host rejects
   * because the branch moved (someone else pushed to it) is permanent: Kumoss never force-pushes
   * over another person's commits, and a retry would be rejected the same way.
   */
  async push(dir: string, branch: string): Promise<void> {
    try {
      await this.run(['push', '--porcelain', 'origin', `${branch}:refs/heads/${branch}`], dir);
    } catch (err) {
      // `--porcelain` reports each ref on a line `<flag>\t<from>:<to>\t<summary>`; `!` is a ref the
      // remote rejected (it moved), as opposed to a transport failure, which is retried.
      const rejected =
        err instanceof GitError &&
        err.stdout
          .split('\n')
          .some((line) => line.startsWith('!\t') && line.includes(`:refs/heads/${branch}\t`));
      if (rejected) {
        throw ApplicationFailure.nonRetryable(
          `The branch ${branch} moved on the remote while Kumoss worked on it (someone else pushed to it); ` +
            'Kumoss does not overwrite it. Merge or reset that branch, then start the round again.',
          ErrorTypes.BranchMoved,
        );
      }
      throw err;
    }
  }
}
