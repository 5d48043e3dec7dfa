// The embedded git host: every bare repository under one directory, served over HTTPS on
// loopback through `git http-backend` (smart HTTP, protocol v2), with a self-signed CA that the
// worker's git trusts through GIT_SSL_CAINFO. A push to a repository that does not exist yet
// creates it, so `git push https://127.0.0.1:8443/demo.git main` is enough to publish a root.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Certificates {
  caPath: string;
  certPath: string;
  keyPath: string;
}

/** Creates (once) a CA and a server certificate for 127.0.0.1 / localhost under `dir`. */
export async function ensureCertificates(dir: string): Promise<Certificates> {
  mkdirSync(dir, { recursive: true });
  const caKey = join(dir, 'ca.key');
  const caPath = join(dir, 'ca.pem');
  const keyPath = join(dir, 'server.key');
  const certPath = join(dir, 'server.pem');
  if (existsSync(caPath) && existsSync(certPath) && existsSync(keyPath)) {
    return { caPath, certPath, keyPath };
  }
  const csr = join(dir, 'server.csr');
  const ext = join(dir, 'server.ext');
  writeFileSync(
    ext,
    [
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      'basicConstraints=CA:FALSE',
      'keyUsage=digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      '',
    ].join('\n'),
  );
  // prettier-ignore
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', caKey, '-out', caPath,
    '-days', '3650', '-subj', '/CN=Kumoss local git host CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  // prettier-ignore
  await run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', csr,
    '-subj', '/CN=127.0.0.1']);
  // prettier-ignore
  await run('openssl', ['x509', '-req', '-in', csr, '-CA', caPath, '-CAkey', caKey, '-CAcreateserial',
    '-out', certPath, '-days', '825', '-sha256', '-extfile', ext]);
  return { caPath, certPath, keyPath };
}

export interface GitHostOptions {
  reposDir: string;
  certsDir: string;
  host?: string;
  port?: number;
  log?: (msg: string) => void;
  /** When set, every request must carry this token (HTTP Basic password or Bearer), as GitHub asks for GIT_TOKEN. */
  requireToken?: string;
}

/** True when the Authorization header carries `token` (Basic with it as password, or Bearer). */
function carriesToken(header: string | undefined, token: string): boolean {
  const m = /^(Basic|Bearer)\s+(\S+)$/i.exec(header ?? '');
  if (!m?.[2]) return false;
  if (m[1]?.toLowerCase() === 'bearer') return m[2] === token;
  const decoded = Buffer.from(m[2], 'base64').toString('utf8');
  return decoded.slice(decoded.indexOf(':') + 1) === token;
}

export interface GitHost {
  url: string;
  port: number;
  reposDir: string;
  caPath: string;
  /** https URL of a repository, e.g. repoUrl('demo') -> https://127.0.0.1:8443/demo.git */
  repoUrl(name: string): string;
  close(): Promise<void>;
}

const REPO_PATH = /^\/((?:[A-Za-z0-9._-]+\/)*[A-Za-z0-9._-]+\.git)(\/.*)?$/;

/** Lists the bare repositories under `dir`, as paths relative to it (`team/app.git`). */
export function listRepositories(dir: string): string[] {
  const found: string[] = [];
  const walk = (d: string, depth: number): void => {
    if (depth > 4 || !existsSync(d)) return;
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (!statSync(full).isDirectory()) continue;
      if (name.endsWith('.git') && existsSync(join(full, 'HEAD'))) found.push(relative(dir, full));
      else walk(full, depth + 1);
    }
  };
  walk(dir, 0);
  return found.sort();
}

function sendError(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(`${message}\n`);
}

export async function startGitHost(opts: GitHostOptions): Promise<GitHost> {
  const { reposDir } = opts;
  mkdirSync(reposDir, { recursive: true });
  const certs = await ensureCertificates(opts.certsDir);
  const log = opts.log ?? (() => undefined);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://git-host.invalid');
    if (url.pathname === '/' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ repositories: listRepositories(reposDir) }));
      return;
    }
    if (opts.requireToken && !carriesToken(req.headers.authorization, opts.requireToken)) {
      res.writeHead(401, {
        'content-type': 'text/plain; charset=utf-8',
        'www-authenticate': 'Basic realm="kumoss git host"',
      });
      res.end('authentication required\n');
      return;
    }
    const match = REPO_PATH.exec(decodeURIComponent(url.pathname));
    const repo = match?.[1];
    if (!repo || repo.split('/').some((part) => part === '..' || part === '.')) {
      sendError(res, 404, 'not a repository path');
      return;
    }
    const repoDir = join(reposDir, repo);
    const service = url.searchParams.get('service');
    const wantsPush = service === 'git-receive-pack' || (match[2] ?? '') === '/git-receive-pack';
    if (!existsSync(join(repoDir, 'HEAD'))) {
      if (!wantsPush) {
        sendError(res, 404, `repository ${repo} not found`);
        return;
      }
      mkdirSync(repoDir, { recursive: true });
      await run('git', ['init', '--bare', '--quiet', '--initial-branch=main', repoDir]);
      log(`created bare repository ${repo} on first push`);
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: reposDir,
      GIT_HTTP_EXPORT_ALL: '1',
      REMOTE_USER: 'kumoss',
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: `/${repo}${match[2] ?? ''}`,
      QUERY_STRING: url.search.replace(/^\?/, ''),
      CONTENT_TYPE: req.headers['content-type'] ?? '',
    };
    if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
    const protocol = req.headers['git-protocol'];
    if (typeof protocol === 'string') env.GIT_PROTOCOL = protocol;
    const encoding = req.headers['content-encoding'];
    if (typeof encoding === 'string') env.HTTP_CONTENT_ENCODING = encoding;

    const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    req.pipe(cgi.stdin);
    let stderr = '';
    cgi.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        if (i < 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 200;
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', (code) => {
      if (!headersDone) sendError(res, 500, `git http-backend failed (${code}): ${stderr.trim()}`);
      else res.end();
      if (code !== 0 && stderr) log(`git http-backend ${repo}: ${stderr.trim()}`);
    });
  };

  const server: Server = createServer(
    { key: readFileSync(certs.keyPath), cert: readFileSync(certs.certPath) },
    (req, res) => {
      handle(req, res).catch((err: unknown) => sendError(res, 500, String(err)));
    },
  );
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolveListen());
  });
  const port = (server.address() as AddressInfo).port;
  const base = `https://${opts.host ?? '127.0.0.1'}:${port}`;
  return {
    url: base,
    port,
    reposDir,
    caPath: certs.caPath,
    repoUrl: (name) => `${base}/${name.endsWith('.git') ? name : `${name}.git`}`,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}
