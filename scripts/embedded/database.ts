// The embedded metadata store: a real PostgreSQL server (Debian's, scripts/embedded/postgres.ts)
// with its data under the data directory, listening on loopback. Kumoss connects as the `kumoss`
// role, owner of the `kumoss` database and nothing else; the `postgres` superuser is the
// launcher's. Both passwords are made on first start and kept in `<data_dir>/database.json`
// (mode 0600), where `databaseUrl()` (shared/infra/config.ts) finds them for the CLI.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { embeddedDatabaseSecrets } from '../../shared/infra/config';
import { startPostgres } from './postgres';

export interface EmbeddedDatabase {
  /** The `kumoss` role's URL of the `kumoss` database. */
  url: string;
  port: number;
  close(): Promise<void>;
}

type Credentials = ReturnType<typeof embeddedDatabaseSecrets.parse>;

/** The data directory's database passwords, made on first use (mode 0600). */
function credentials(data: string): Credentials {
  const file = join(data, 'database.json');
  if (!existsSync(file)) {
    const made: Credentials = {
      superuser: randomBytes(18).toString('base64url'),
      kumoss: randomBytes(18).toString('base64url'),
    };
    writeFileSync(file, `${JSON.stringify(made)}\n`, { mode: 0o600, flag: 'wx' });
  }
  return embeddedDatabaseSecrets.parse(JSON.parse(readFileSync(file, 'utf8')));
}

export async function startEmbeddedDatabase(opts: {
  /** The data directory (data_dir): the server's files go under `postgres/`. */
  data: string;
  port: number;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const secret = credentials(opts.data);
  const server = await startPostgres({
    dataDir: join(opts.data, 'postgres'),
    port: opts.port,
    superuserPassword: secret.superuser,
    log: opts.log,
  });
  try {
    await server.createDatabase('kumoss', { user: 'kumoss', password: secret.kumoss });
  } catch (err) {
    await server.stop();
    throw err;
  }
  return {
    url: `postgres://kumoss:${encodeURIComponent(secret.kumoss)}@127.0.0.1:${opts.port}/kumoss`,
    port: opts.port,
    close: () => server.stop(),
  };
}
