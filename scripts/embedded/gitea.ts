// The embedded forge: Gitea (built by setup from the Go module proxy) on loopback over HTTPS with
// the git host's CA, its SQLite database and repositories under one data directory. Started the
// first time, it migrates its database and creates an admin user `kumoss` and an access token for
// Kumoss (kept in <dir>/token, mode 0600); later starts reuse both. Repositories are created by a
// first push (push-to-create) and are public, so a pull request is a page anyone can open.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { requestJson } from '../../shared/infra/http-json';
import { toolPath } from '../../shared/infra/tools.mjs';
import { ensureCertificates } from './git-host';
import { freePort } from './ports';

export interface EmbeddedGitea {
  /** https://127.0.0.1:<port> */
  url: string;
  /** The owner of the repositories Kumoss pushes: https://…/kumoss/<repo>.git */
  owner: string;
  /** An access token of the admin user (send it as GIT_TOKEN / GITEA_TOKEN; never log it). */
  token: string;
  caPath: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

const OWNER = 'kumoss';

function appIni(o: { dir: string; host: string; port: number; cert: string; key: string }): string {
  const bin = toolPath('gitea');
  return `APP_NAME = Kumoss forge
RUN_MODE = prod
WORK_PATH = ${o.dir}

[server]
PROTOCOL = https
HTTP_ADDR = ${o.host}
HTTP_PORT = ${o.port}
ROOT_URL = https://${o.host}:${o.port}/
CERT_FILE = ${o.cert}
KEY_FILE = ${o.key}
STATIC_ROOT_PATH = ${join(dirname(bin), 'static')}
APP_DATA_PATH = ${join(o.dir, 'data')}
DISABLE_SSH = true
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = ${join(o.dir, 'data', 'gitea.db')}

[security]
INSTALL_LOCK = true
SECRET_KEY = ${randomBytes(24).toString('hex')}

[repository]
ROOT = ${join(o.dir, 'repositories')}
ENABLE_PUSH_CREATE_USER = true
DEFAULT_PUSH_CREATE_PRIVATE = false
DEFAULT_BRANCH = main

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false

[indexer]
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false

[log]
MODE = console
LEVEL = warn
`;
}

export async function startGitea(opts: {
  /** Gitea's own directory: app.ini, database, repositories, the token. */
  dir: string;
  /** Where the CA and the server certificate for 127.0.0.1 live (shared with the git host). */
  certsDir: string;
  host?: string;
  port?: number;
  onLog?: (line: string) => void;
}): Promise<EmbeddedGitea> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? (await freePort(host));
  const certs = await ensureCertificates(opts.certsDir);
  mkdirSync(join(opts.dir, 'data'), { recursive: true });
  const config = join(opts.dir, 'app.ini');
  // Written once: the secret key must not change under an existing database.
  const wanted = appIni({ dir: opts.dir, host, port, cert: certs.certPath, key: certs.keyPath });
  const existing = existsSync(config) ? readFileSync(config, 'utf8') : '';
  writeFileSync(
    config,
    existing
      ? existing
          .replace(/^HTTP_PORT = \d+$/m, `HTTP_PORT = ${port}`)
          .replace(/^ROOT_URL = .*$/m, `ROOT_URL = https://${host}:${port}/`)
      : wanted,
  );
  const bin = toolPath('gitea');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: opts.dir,
    GITEA_WORK_DIR: opts.dir,
    // These machines run everything as root, which Gitea refuses unless told otherwise.
    ...(process.getuid?.() === 0 ? { GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT: 'true' } : {}),
  };
  const admin = (args: string[]): string => {
    const r = spawnSync(bin, ['--config', config, ...args], { env, encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0)
      throw new Error(
        `gitea ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim().split('\n').pop() ?? ''}`,
      );
    return r.stdout;
  };
  admin(['migrate']);
  const tokenFile = join(opts.dir, 'token');
  if (!existsSync(tokenFile)) {
    if (
      !admin(['admin', 'user', 'list', '--admin'])
        .split('\n')
        .some((l) => l.split(/\s+/)[1] === OWNER)
    ) {
      admin([
        'admin',
        'user',
        'create',
        '--admin',
        '--username',
        OWNER,
        '--email',
        `${OWNER}@localhost`,
        '--password',
        randomBytes(18).toString('base64url'),
        '--must-change-password=false',
      ]);
    }
    const token = admin([
      'admin',
      'user',
      'generate-access-token',
      '--username',
      OWNER,
      '--token-name',
      `kumoss-${Date.now()}`,
      '--scopes',
      'all',
      '--raw',
    ]).trim();
    writeFileSync(tokenFile, `${token}\n`);
    chmodSync(tokenFile, 0o600);
  }
  const token = readFileSync(tokenFile, 'utf8').trim();
  const child = spawn(bin, ['--config', config, 'web'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const s of [child.stdout, child.stderr]) {
    s.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) if (line.trim()) opts.onLog?.(line);
    });
  }
  const url = `https://${host}:${port}`;
  const ca = readFileSync(certs.caPath, 'utf8');
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`gitea exited with code ${child.exitCode} while starting`);
    try {
      await requestJson(`${url}/api/v1/version`, { ca, timeoutMs: 2000 });
      break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gitea did not answer on ${url} within 60 s`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    owner: OWNER,
    token,
    caPath: certs.caPath,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}
