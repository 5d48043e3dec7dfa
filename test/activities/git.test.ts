// Proof (c): clone over HTTPS from the local git host, commit on a branch, push, see the branch.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { createServer as createHttpsServer } from 'node:https';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, describe, expect, it } from 'vitest';
import { GitClient, GitError } from '../../activities/git';
import { GitAccess } from '../../activities/git-access';
import { gitClient, stack } from '../support/stack';
import { makeTlsFiles } from '../support/tls-proxy';

describe('git over HTTPS on the embedded git host', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), 'kumoss-git-'));
    dirs.push(d);
    return d;
  };

  function seedRepository(name: string): string {
    const git = gitClient();
    const src = tmp();
    const run = (...args: string[]) => execFileSync('git', args, { cwd: src, env: git.env(), stdio: 'pipe' });
    run('init', '--quiet', '--initial-branch=main');
    writeFileSync(join(src, 'main.tf'), 'terraform {}\n');
    run('add', '--all');
    run('commit', '--quiet', '-m', 'initial');
    const url = `${stack().gitHostUrl}/${name}.git`;
    run('push', '--quiet', url, 'main'); // the first push creates the repository on the host
    return url;
  }

  it('commits only the files named, never what init left beside them', async () => {
    const url = seedRepository(`team/git-paths-${Date.now()}`);
    const git = gitClient();
    const dir = join(tmp(), 'checkout');
    await git.checkout({ url, dir, branch: 'kumoss/session-paths' });
    writeFileSync(join(dir, 'main.tf'), 'terraform {}\n# remediated\n');
    mkdirSync(join(dir, '.terraform', 'providers'), { recursive: true });
    writeFileSync(join(dir, '.terraform', 'providers', 'plugin'), 'binary');
    writeFileSync(join(dir, '.terraform.lock.hcl'), '# lock\n');
    const c = await git.commitAll(dir, 'Remediate drift', ['main.tf']);
    expect(c.created).toBe(true);
    expect((await git.run(['show', '--name-only', '--format=', 'HEAD'], dir)).trim().split('\n')).toEqual([
      'main.tf',
    ]);
    expect((await git.commitAll(dir, 'again', ['main.tf'])).created).toBe(false);
  });

  it('clones, commits on a session branch, pushes, and the host has the branch', async () => {
    const url = seedRepository(`team/git-proof-${Date.now()}`);
    const git = gitClient();
    const dir = join(tmp(), 'checkout');
    await git.checkout({ url, dir, branch: 'kumoss/session-1' });
    writeFileSync(join(dir, 'main.tf'), 'terraform {}\n# remediated\n');
    const first = await git.commitAll(dir, 'Remediate drift');
    expect(first.created).toBe(true);
    await git.push(dir, 'kumoss/session-1');

    const branches = await git.remoteBranches(url);
    expect(branches.get('kumoss/session-1')).toBe(first.sha);
    expect(branches.has('main')).toBe(true);
    // And the bare repository on disk has it too.
    const bare = join(stack().gitReposDir, new URL(url).pathname.slice(1));
    const sha = execFileSync('git', ['rev-parse', 'refs/heads/kumoss/session-1'], { cwd: bare })
      .toString()
      .trim();
    expect(sha).toBe(first.sha);
  });

  it('makes a repeated commit and push no-ops (idempotent activities)', async () => {
    const url = seedRepository(`idempotent-${Date.now()}`);
    const git = gitClient();
    const dir = join(tmp(), 'checkout');
    await git.checkout({ url, dir, branch: 'kumoss/s2' });
    writeFileSync(join(dir, 'extra.tf'), '# change\n');
    const a = await git.commitAll(dir, 'change');
    const b = await git.commitAll(dir, 'change');
    expect(b).toEqual({ sha: a.sha, created: false });
    await git.push(dir, 'kumoss/s2');
    await git.push(dir, 'kumoss/s2');
    expect((await git.remoteBranches(url)).get('kumoss/s2')).toBe(a.sha);
  });

  it('continues an existing session branch on a later checkout', async () => {
    const url = seedRepository(`continue-${Date.now()}`);
    const git = gitClient();
    const d1 = join(tmp(), 'c1');
    await git.checkout({ url, dir: d1, branch: 'kumoss/s3' });
    writeFileSync(join(d1, 'a.tf'), '# a\n');
    const a = await git.commitAll(d1, 'a');
    await git.push(d1, 'kumoss/s3');
    const d2 = join(tmp(), 'c2');
    await git.checkout({ url, dir: d2, branch: 'kumoss/s3' });
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: d2 }).toString().trim();
    expect(head).toBe(a.sha);
  });

  it('trusts exactly the CA bundle it is given: no system certificate directory read, no host outside it trusted', async () => {
    const url = seedRepository(`trust-${Date.now()}`);
    // curl's own account of the certificates it loaded, as git's trace prints it.
    const own = gitClient();
    const r = spawnSync('git', ['ls-remote', '--heads', url], {
      env: { ...own.env(), GIT_TRACE_CURL: '1' },
      encoding: 'utf8',
    });
    expect(r.stdout).toContain('refs/heads/main');
    const loaded = [...r.stderr.matchAll(/found (\d+) certificates in (\S*)/g)].map((m) => [m[2], m[1]]);
    // The bundle, then an empty CA path: nothing read from the system's certificate directory.
    expect(loaded).toEqual([
      [own.env().GIT_SSL_CAINFO, '1'],
      ['', '0'],
    ]);
    // A bundle without the host's CA does not reach it, whatever the system trusts.
    const system = new GitClient({ caFile: '/etc/ssl/certs/ca-certificates.crt' });
    await expect(system.remoteBranches(url)).rejects.toThrow(
      /certificate verification failed|SSL certificate problem/,
    );
  });

  it('refuses to clone a repository that does not exist', async () => {
    await expect(
      gitClient().remoteBranches(`${stack().gitHostUrl}/missing-${Date.now()}.git`),
    ).rejects.toThrow();
  });

  it('follows no redirect: a host that sends the clone elsewhere gets a refusal, the other origin nothing', async () => {
    const tls = await makeTlsFiles(tmp());
    const elsewhere: string[] = [];
    const other = createHttpsServer(
      { key: readFileSync(tls.serverKey), cert: readFileSync(tls.serverCert) },
      (req, res) => {
        elsewhere.push(req.url ?? '');
        res.writeHead(404).end();
      },
    );
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    const otherPort = (other.address() as AddressInfo).port;
    const redirecting = createHttpsServer(
      { key: readFileSync(tls.serverKey), cert: readFileSync(tls.serverCert) },
      (req, res) => {
        res.writeHead(301, { location: `https://127.0.0.1:${otherPort}${req.url ?? '/'}` }).end();
      },
    );
    await new Promise<void>((r) => redirecting.listen(0, '127.0.0.1', r));
    const port = (redirecting.address() as AddressInfo).port;
    try {
      const err = await new GitClient({ caFile: tls.caPath })
        .remoteBranches(`https://127.0.0.1:${port}/team/moved.git`)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GitError);
      expect(elsewhere).toEqual([]);
    } finally {
      redirecting.close();
      other.close();
    }
  });

  it('checks a repository’s host again at clone time and connects to the address it checked', async () => {
    const access = new GitAccess({ git: gitClient(), operatorTokens: {}, targets: { allowed: [] } });
    for (const url of ['https://localhost:8443/team/x.git', 'https://169.254.169.254/latest.git'])
      await expect(access.forRepository(url, undefined)).rejects.toMatchObject({
        type: 'TargetRefusedError',
        message: expect.stringMatching(/is refused: .*private, loopback or link-local/) as unknown,
      });
    // The embedded host, as the configuration names it: allowed, and cloned.
    const allowed = new GitAccess({
      git: gitClient(),
      operatorTokens: {},
      targets: { allowed: [new URL(stack().gitHostUrl).origin] },
    });
    const url = seedRepository(`team/git-target-${Date.now()}`);
    const git = await allowed.forRepository(url, undefined);
    expect((await git.remoteBranches(url)).has('main')).toBe(true);
    // A public name is pinned to the address it was checked at (libcurl's resolve list).
    const pinned = await allowed.forRepository('https://8.8.8.8/team/x.git', undefined);
    expect(Object.values(pinned.env())).toContain('8.8.8.8:443:8.8.8.8');
  });

  it('stops a call to a git host whose transfer stalls, with git’s own error', async () => {
    // A host that completes the TLS handshake, takes the request and then says nothing (git
    // speaks only https to a host).
    const tls = await makeTlsFiles(tmp());
    const held: Socket[] = [];
    const server = createTlsServer(
      { key: readFileSync(tls.serverKey), cert: readFileSync(tls.serverCert) },
      (socket) => {
        held.push(socket);
        socket.on('error', () => undefined);
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const started = Date.now();
      const err = await new GitClient({ timeoutMs: 2000, caFile: tls.caPath })
        .run(['ls-remote', `https://127.0.0.1:${port}/team/stalled.git`])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(GitError);
      expect((err as GitError).message).toMatch(/^git ls-remote failed: .*(too slow|timed out)/i);
      // Stopped by the stall, long before the remote call's total of an hour.
      expect(Date.now() - started).toBeLessThan(60_000);
    } finally {
      held.forEach((s) => s.destroy());
      server.close();
    }
  });

  it("keeps simple-git's guards on: options that run programs are refused, ambient GIT_* variables do not reach git", async () => {
    const url = seedRepository(`team/git-guards-${Date.now()}`);
    const git = gitClient();
    const marker = join(tmp(), 'ran');
    // `--upload-pack` runs a program of the caller's choosing: refused before git starts.
    await expect(git.run(['clone', `--upload-pack=touch ${marker}`, url, join(tmp(), 'c1')])).rejects.toThrow(
      /not permitted/,
    );
    await expect(git.run(['-c', `core.sshCommand=touch ${marker}`, 'ls-remote', url])).rejects.toThrow(
      /not permitted/,
    );
    // Local plumbing, which runs without simple-git, passes the same check.
    await expect(
      git.run(['-c', `core.fsmonitor=touch ${marker}`, 'status'], join(tmp(), 'c1-missing')),
    ).rejects.toThrow(/refused: Configuring core.fsmonitor is not permitted/);
    expect(existsSync(marker)).toBe(false);
    // An ambient GIT_DIR would point every call at another repository: it is dropped.
    const dir = join(tmp(), 'checkout');
    await git.checkout({ url, dir, branch: 'kumoss/s-guards' });
    const before = process.env.GIT_DIR;
    process.env.GIT_DIR = join(tmp(), 'elsewhere.git');
    try {
      expect((await git.run(['rev-parse', '--abbrev-ref', 'HEAD'], dir)).trim()).toBe('kumoss/s-guards');
    } finally {
      if (before === undefined) delete process.env.GIT_DIR;
      else process.env.GIT_DIR = before;
    }
  });

  it('adopts a cycle commit an earlier attempt pushed late, and refuses anyone else’s', async () => {
    const url = seedRepository(`team/git-cycle-${Date.now()}`);
    const git = gitClient();
    const lost = join(tmp(), 'lost');
    const retry = join(tmp(), 'retry');
    await git.checkout({ url, dir: lost, branch: 'kumoss/s-cycle' });
    await git.checkout({ url, dir: retry, branch: 'kumoss/s-cycle' });
    // The retry commits the cycle; the dead worker's push of the same cycle lands first.
    writeFileSync(join(lost, 'main.tf'), 'terraform {}\n# cycle, first attempt\n');
    const first = await git.commitAll(lost, 'Reconcile\n\nKumoss-Cycle: s/r/1/0');
    await git.push(lost, 'kumoss/s-cycle');
    writeFileSync(join(retry, 'main.tf'), 'terraform {}\n# cycle, second attempt\n');
    await git.commitAll(retry, 'Reconcile\n\nKumoss-Cycle: s/r/1/0');
    expect(await git.pushCycle(retry, 'kumoss/s-cycle', 'Kumoss-Cycle: s/r/1/0')).toBe(first.sha);
    expect(await git.head(retry)).toBe(first.sha);
    // Someone else's commit is not adopted.
    writeFileSync(join(lost, 'main.tf'), 'terraform {}\n# a person\n');
    await git.commitAll(lost, 'A person edits the branch');
    await git.push(lost, 'kumoss/s-cycle');
    writeFileSync(join(retry, 'main.tf'), 'terraform {}\n# next cycle\n');
    await git.commitAll(retry, 'Reconcile\n\nKumoss-Cycle: s/r/1/1');
    const err = await git.pushCycle(retry, 'kumoss/s-cycle', 'Kumoss-Cycle: s/r/1/1').then(
      () => undefined,
      (e: unknown) => e as ApplicationFailure,
    );
    expect(err?.type).toBe('BranchMovedError');
  });

  it('a push rejected because the branch moved is a permanent failure with a reason a person can act on', async () => {
    const url = seedRepository(`team/git-moved-${Date.now()}`);
    const git = gitClient();
    const mine = join(tmp(), 'mine');
    const theirs = join(tmp(), 'theirs');
    await git.checkout({ url, dir: mine, branch: 'kumoss/s-moved' });
    await git.checkout({ url, dir: theirs, branch: 'kumoss/s-moved' });
    writeFileSync(join(theirs, 'main.tf'), 'terraform {}\n# someone else\n');
    await git.commitAll(theirs, 'Their change');
    await git.push(theirs, 'kumoss/s-moved');
    writeFileSync(join(mine, 'main.tf'), 'terraform {}\n# kumoss\n');
    await git.commitAll(mine, 'Remediate drift');
    const err = await git.push(mine, 'kumoss/s-moved').then(
      () => null,
      (e: unknown) => e as ApplicationFailure,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err?.nonRetryable).toBe(true);
    expect(err?.type).toBe('BranchMovedError');
    expect(err?.message).toMatch(/moved on the remote.*does not overwrite it/);
    // Their commit is still the tip of the branch.
    const remote = await git.remoteBranches(url);
    expect(remote.get('kumoss/s-moved')).toBe(await git.head(theirs));
  });
});

describe('embedded git host', () => {
  it('lists its repositories and refuses paths outside its directory', async () => {
    const s = stack();
    const { request } = await import('node:https');
    const { readFileSync } = await import('node:fs');
    const get = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${s.gitHostUrl}${path}`, { ca: readFileSync(s.gitCaFile) }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
    const list = await get('/');
    expect(list.status).toBe(200);
    expect(JSON.parse(list.body)).toHaveProperty('repositories');
    const traversal = await get('/../../etc.git/info/refs?service=git-upload-pack');
    expect(traversal.status).toBe(404);
    const missing = await get(`/missing-${Date.now()}.git/info/refs?service=git-upload-pack`);
    expect(missing.status).toBe(404);
  });
});
