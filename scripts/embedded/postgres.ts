// A real PostgreSQL server on loopback (Debian's postgresql package): initdb into a data directory
// (once), `postgres` on the given port, listening on 127.0.0.1 only. With a superuser password
// every connection authenticates with it (scram-sha-256), the socket's too; without one loopback is
// trusted (the test tiers' throwaway servers). PostgreSQL will not run as root: when this process
// is root, the server runs as the package's `postgres` user.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** The server binaries: `KUMOSS_POSTGRES_BIN_DIR`, else the newest /usr/lib/postgresql/<n>/bin. */
export function postgresBinDir(): string {
  if (process.env.KUMOSS_POSTGRES_BIN_DIR) return process.env.KUMOSS_POSTGRES_BIN_DIR;
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(join(base, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0])
    throw new Error(
      'PostgreSQL server binaries not found (Debian: apt-get install postgresql; or set KUMOSS_POSTGRES_BIN_DIR)',
    );
  return join(base, versions[0], 'bin');
}

export interface PostgresServer {
  port: number;
  /** A superuser URL for `database` (default `postgres`). */
  url(database?: string): string;
  /** Creates a role with a password and a database it owns. */
  createDatabase(name: string, owner?: { user: string; password: string }): Promise<void>;
  /** True when `sql` returns a row in `database`. */
  hasRow(database: string, sql: string): Promise<boolean>;
  stop(): Promise<void>;
}

export async function startPostgres(opts: {
  dataDir: string;
  port: number;
  /** The `postgres` role's password; set at initdb, required of every connection. */
  superuserPassword?: string;
  /**
   * A throwaway server (the test tiers'): nothing is flushed to disk (`fsync=off`, initdb
   * `--no-sync`), so a crash of the machine may lose or corrupt it. Otherwise every commit is on
   * disk before it is acknowledged, as PostgreSQL ships.
   */
  throwaway?: boolean;
  log?: (line: string) => void;
}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const root = process.getuid?.() === 0;
  const owner = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
  mkdirSync(opts.dataDir, { recursive: true });
  const socketDir = join(opts.dataDir, 'socket');
  const data = join(opts.dataDir, 'data');
  mkdirSync(socketDir, { recursive: true });
  if (root) {
    const pw = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (pw.status !== 0)
      throw new Error('running as root and there is no postgres user to run PostgreSQL as');
    owner.uid = Number(pw.stdout);
    owner.gid = Number(gid.stdout);
    for (const d of [opts.dataDir, socketDir]) chownSync(d, owner.uid, owner.gid);
    // The server's user must reach its directory through every parent.
    for (let d = opts.dataDir; d !== '/' && d !== '.'; d = join(d, '..')) {
      if ((statSync(d).mode & 0o001) === 0) spawnSync('chmod', ['o+x', d]);
    }
  }
  const runAs = root ? { uid: owner.uid, gid: owner.gid, env: { ...process.env, HOME: opts.dataDir } } : {};
  if (!existsSync(join(data, 'PG_VERSION'))) {
    // The password reaches initdb through a file only the server's user reads, gone at once.
    const pwfile = join(opts.dataDir, '.initdb-password');
    if (opts.superuserPassword !== undefined) {
      writeFileSync(pwfile, `${opts.superuserPassword}\n`, { mode: 0o600 });
      chownSync(pwfile, owner.uid, owner.gid);
    }
    const auth =
      opts.superuserPassword === undefined
        ? ['--auth=trust']
        : ['--auth=scram-sha-256', `--pwfile=${pwfile}`];
    const r = spawnSync(
      join(bin, 'initdb'),
      ['-D', data, '-U', 'postgres', ...auth, '--encoding=UTF8', ...(opts.throwaway ? ['--no-sync'] : [])],
      { encoding: 'utf8', ...runAs },
    );
    rmSync(pwfile, { force: true });
    if (r.status !== 0) throw new Error(`initdb failed: ${r.stderr || r.stdout}`);
  }
  const args = [
    '-D',
    data,
    '-p',
    String(opts.port),
    '-k',
    socketDir,
    '-c',
    'listen_addresses=127.0.0.1',
    ...(opts.throwaway ? ['-c', 'fsync=off'] : []),
    '-c',
    'max_connections=300',
  ];
  // The server is this process's own child (no runuser between), so a signal reaches it.
  const child: ChildProcess = spawn(join(bin, 'postgres'), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...runAs,
  });
  const state: { exited: number | null; tail: string } = { exited: null, tail: '' };
  child.once('exit', (code) => {
    state.exited = code ?? -1;
  });
  for (const s of [child.stdout, child.stderr])
    s?.on('data', (d: Buffer) => {
      state.tail = (state.tail + d.toString()).slice(-2000);
      opts.log?.(d.toString().trimEnd());
    });
  const credentials =
    opts.superuserPassword === undefined
      ? 'postgres'
      : `postgres:${encodeURIComponent(opts.superuserPassword)}`;
  const url = (database = 'postgres') => `postgres://${credentials}@127.0.0.1:${opts.port}/${database}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (state.exited !== null)
      throw new Error(`postgres exited (code ${state.exited}) before accepting connections: ${state.tail}`);
    const c = new pg.Client({ connectionString: url() });
    try {
      await c.connect();
      await c.query('select 1');
      await c.end();
      break;
    } catch (err) {
      await c.end().catch(() => undefined);
      if (Date.now() > deadline) throw new Error(`postgres did not accept connections: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    port: opts.port,
    url,
    async createDatabase(name, owner) {
      const c = new pg.Client({ connectionString: url() });
      await c.connect();
      try {
        const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
        if (owner) {
          const exists = await c.query('select 1 from pg_roles where rolname = $1', [owner.user]);
          if (exists.rowCount === 0)
            await c.query(
              `create role ${ident(owner.user)} login password '${owner.password.replace(/'/g, "''")}'`,
            );
        }
        const db = await c.query('select 1 from pg_database where datname = $1', [name]);
        if (db.rowCount === 0)
          await c.query(`create database ${ident(name)}${owner ? ` owner ${ident(owner.user)}` : ''}`);
      } finally {
        await c.end();
      }
    },
    async hasRow(database, sql) {
      const c = new pg.Client({ connectionString: url(database) });
      await c.connect();
      try {
        return ((await c.query(sql)).rowCount ?? 0) > 0;
      } finally {
        await c.end();
      }
    },
    async stop() {
      if (state.exited !== null) return;
      const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // SIGINT: fast shutdown.
      child.kill('SIGINT');
      await Promise.race([done, new Promise((r) => setTimeout(r, 10_000))]);
      if (state.exited === null) child.kill('SIGKILL');
    },
  };
}
