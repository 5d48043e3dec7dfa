// `npm start`: the whole system on its embedded defaults — Temporal dev server with its Web UI,
// object store, metadata store, git host, worker and API — one command, Ctrl-C stops it all.
// It supervises: a worker or API process that dies once the system is up is started again (with
// a backoff from 1 s doubling to 30 s, logged); only Ctrl-C or a failure to start stops it all.
// A component whose configured address is not loopback (TEMPORAL_ADDRESS, S3_ENDPOINT,
// DATABASE_URL pointing elsewhere) is used as it is instead of being started here.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createDb } from '../shared/infra/db';
import { ensureGitConnection, type GitConnectionKind } from '../shared/infra/db/git-connections';
import { ensureOrganization } from '../shared/infra/db/users';
import { newSecretsKey } from '../shared/infra/secret-box';
import { join } from 'node:path';
import {
  ConfigError,
  dataDir,
  databaseUrl,
  gitReposDir,
  isLoopback,
  loadConfig,
  projectRoot,
  type KumossConfig,
} from '../shared/infra/config';
import { startAwsEmulator } from './embedded/aws-emulator';
import { startEmbeddedDatabase } from './embedded/database';
import { startGitea } from './embedded/gitea';
import { ensureWebBuild } from './web-build';
import { startGitHost } from './embedded/git-host';
import { buildingInBackground, GO_TOOLS, toolReady, toolsDir, waitForTool } from '../shared/infra/tools.mjs';
import { startObjectStore } from './embedded/object-store';
import { assertPortFree, PortTakenError } from './embedded/ports';
import { loadDevServerSpec, startDevServer } from './embedded/temporal-dev';
import { temporalTarget } from '../shared/infra/temporal-connection';
import { createInterface } from 'node:readline';

const say = (msg: string): void => console.log(`[kumoss] ${msg}`);
const stops: { name: string; stop: () => Promise<void> }[] = [];
let stopping = false;
/** Set once every component answered: from then on a process that dies is restarted. */
let up = false;
const RESTART_MIN_MS = 1000;
const RESTART_MAX_MS = 30_000;
/** A process that ran this long before dying starts again after the shortest backoff. */
const STABLE_MS = 60_000;

async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    say('stopping…');
    for (const s of [...stops].reverse()) {
      try {
        await s.stop();
      } catch (err) {
        say(`${s.name} did not stop cleanly: ${(err as Error).message}`);
      }
    }
    say('stopped');
  }
  process.exit(code);
}

/**
 * Runs `script` as a supervised child process: its pid is in <data>/run/<name>.pid, its output in
 * <data>/logs/<name>.log; when it dies after the system is up it is started again after a backoff.
 */
function spawnService(
  name: string,
  script: string,
  env: NodeJS.ProcessEnv,
  dirs: { logs: string; run: string },
) {
  let child: ChildProcess | undefined;
  let backoff = RESTART_MIN_MS;
  let restarts = 0;
  const pidFile = join(dirs.run, `${name}.pid`);
  const file = createWriteStream(join(dirs.logs, `${name}.log`), { flags: 'a' });
  const launch = (): void => {
    const started = Date.now();
    const proc = spawn(process.execPath, ['--import', 'tsx', script], {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    if (proc.pid) writeFileSync(pidFile, `${proc.pid}\n`);
    // Whole lines to the console (a chunk may end mid-line), every byte to the log file.
    for (const stream of [proc.stdout, proc.stderr]) {
      if (!stream) continue;
      stream.on('data', (d: Buffer) => file.write(d));
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        if (line.trim()) console.log(`[${name}] ${line}`);
      });
    }
    proc.once('exit', (code, signal) => {
      if (stopping) return;
      const how = signal ?? `code ${code}`;
      if (!up) {
        say(`${name} exited while starting (${how}); see ${join(dirs.logs, `${name}.log`)}`);
        void shutdown(1);
        return;
      }
      if (Date.now() - started >= STABLE_MS) backoff = RESTART_MIN_MS;
      restarts += 1;
      say(
        `${name} exited unexpectedly (${how}); restarting in ${backoff / 1000}s (restart ${restarts}); see ${join(dirs.logs, `${name}.log`)}`,
      );
      const wait = backoff;
      backoff = Math.min(backoff * 2, RESTART_MAX_MS);
      setTimeout(() => {
        if (!stopping) launch();
      }, wait).unref();
    });
  };
  launch();
  stops.push({
    name,
    stop: () =>
      new Promise<void>((resolveStop) => {
        const proc = child;
        rmSync(pidFile, { force: true });
        if (!proc || proc.exitCode !== null || proc.signalCode !== null) return resolveStop();
        proc.once('exit', () => resolveStop());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 10_000).unref();
      }),
  });
}

async function waitForHealth(url: string, timeoutMs: number): Promise<unknown> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      const body: unknown = await res.json();
      if (res.ok) return body;
      last = JSON.stringify(body);
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`API health did not turn ok in ${timeoutMs / 1000}s: ${last}`);
}

/** The data directory's KUMOSS_SECRETS_KEY, made on first use (mode 0600). */
function embeddedSecretsKey(data: string): string {
  const file = join(data, 'secrets.key');
  if (!existsSync(file)) writeFileSync(file, `${newSecretsKey()}\n`, { mode: 0o600, flag: 'wx' });
  return readFileSync(file, 'utf8').trim();
}

/** Registers the embedded hosts as git connections of organization "default" (idempotent). */
async function connectEmbeddedHosts(url: string, hosts: { origin: string; kind: GitConnectionKind }[]) {
  const db = createDb(url, { max: 1 });
  try {
    const organization = await ensureOrganization(db, 'default');
    for (const h of hosts) await ensureGitConnection(db, organization, h.origin, h.kind);
  } finally {
    await db.destroy();
  }
}

async function main(config: KumossConfig): Promise<void> {
  const data = dataDir(config);
  const logDir = join(data, 'logs');
  const runDir = join(data, 'run');
  mkdirSync(logDir, { recursive: true });
  mkdirSync(runDir, { recursive: true });
  // Where Temporal is, after the environment configuration (TEMPORAL_*, a temporal.toml profile).
  const temporal = temporalTarget(config.temporal);
  const embeddedTemporal = isLoopback(temporal.address) && !temporal.describe.tls;
  // The embedded dev server listens where the configuration says Temporal and its Web UI are.
  const spec = {
    ...loadDevServerSpec(),
    ...(embeddedTemporal ? { port: Number(temporal.address.split(':').pop()) } : {}),
    ...(isLoopback(config.temporal.ui_url) ? { ui_port: Number(new URL(config.temporal.ui_url).port) } : {}),
  };
  const storageUrl = new URL(config.storage.endpoint);
  const embeddedStorage = isLoopback(config.storage.endpoint);
  const embeddedDb = !config.database.url;

  // Fail before starting anything when a port is taken.
  if (embeddedTemporal) {
    await assertPortFree(spec.port, 'Temporal frontend (temporal-dev.yaml port)');
    await assertPortFree(spec.ui_port, 'Temporal Web UI (temporal-dev.yaml ui_port)');
  }
  if (embeddedStorage) await assertPortFree(Number(storageUrl.port), 'object store (storage.endpoint)');
  if (embeddedDb)
    await assertPortFree(config.database.embedded_port, 'metadata store (database.embedded_port)');
  await assertPortFree(config.git_host.port, 'git host (git_host.port)', config.git_host.host);
  await assertPortFree(config.api.port, 'API (api.port)', config.api.host);
  if (!config.services.gitea.url && config.services.gitea.embedded_port)
    await assertPortFree(
      config.services.gitea.embedded_port,
      'forge (services.gitea.embedded_port)',
      config.git_host.host,
    );
  if (!config.runners.aws.endpoint_url)
    await assertPortFree(
      config.runners.aws.embedded_emulator_port,
      'AWS emulator (runners.aws.embedded_emulator_port)',
    );

  let uiUrl = config.temporal.ui_url;
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Credentials an organization stores with its git connections are sealed with this key: the
  // environment's, else one kept in the data directory (readable by this user only).
  if (!env.KUMOSS_SECRETS_KEY) env.KUMOSS_SECRETS_KEY = embeddedSecretsKey(data);
  let forgeUrl = '';

  const temporalStarted = async (): Promise<void> => {
    if (!embeddedTemporal) return;
    say(
      `starting Temporal dev server on ${spec.ip}:${spec.port} (history in ${join(data, spec.db_filename ?? '')})`,
    );
    const temporalLog = createWriteStream(join(logDir, 'temporal.log'), { flags: 'a' });
    const server = await startDevServer(spec, { dataDir: data, onLog: (l) => temporalLog.write(`${l}\n`) });
    server.process.once('exit', (code) => {
      if (!stopping) {
        say(`Temporal dev server exited unexpectedly (code ${code}); see ${join(logDir, 'temporal.log')}`);
        void shutdown(1);
      }
    });
    stops.push({ name: 'temporal', stop: () => server.stop() });
    uiUrl = server.uiUrl;
  };
  const storageStarted = async (): Promise<void> => {
    if (!embeddedStorage) return;
    const store = await startObjectStore({
      directory: join(data, 's3'),
      bucket: config.storage.bucket,
      host: storageUrl.hostname,
      port: Number(storageUrl.port),
    });
    stops.push({ name: 'object store', stop: () => store.close() });
    say(`object store (s3rver) on ${store.endpoint}, bucket ${config.storage.bucket}`);
  };
  const databaseStarted = async (): Promise<void> => {
    if (!embeddedDb) return;
    const dbLog = createWriteStream(join(logDir, 'postgres.log'), { flags: 'a' });
    const t0 = Date.now();
    const db = await startEmbeddedDatabase({
      data,
      port: config.database.embedded_port,
      log: (l) => dbLog.write(`${l}\n`),
    });
    stops.push({ name: 'database', stop: () => db.close() });
    if (existsSync(join(data, 'pgdata')))
      say(
        `${join(data, 'pgdata')} holds an earlier embedded store (PGlite), which is no longer read: the organizations and tokens in it are not carried over; delete it when you have no use for it`,
      );
    say(
      `metadata store (PostgreSQL, data in ${join(data, 'postgres')}) on 127.0.0.1:${db.port} in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
  };
  const awsStarted = async (): Promise<void> => {
    if (config.runners.aws.endpoint_url || !config.runners.aws.embedded_emulator_port) return;
    const aws = await startAwsEmulator({ port: config.runners.aws.embedded_emulator_port });
    stops.push({ name: 'AWS emulator', stop: () => aws.stop() });
    env.KUMOSS_AWS_ENDPOINT_URL = aws.endpoint;
    if (!config.engine.aws_endpoint_url) env.KUMOSS_ENGINE_AWS_ENDPOINT_URL = aws.endpoint;
    say(`AWS emulator (moto_server) on ${aws.endpoint} for the runner DAG and the engine's AWS provider`);
  };
  // The forge after the git host: the two serve HTTPS with the certificates the first one makes.
  const hostsStarted = async () => {
    const gitHost = await startGitHost({
      reposDir: gitReposDir(config),
      certsDir: join(data, 'certs'),
      host: config.git_host.host,
      port: config.git_host.port,
      log: (m) => say(`git host: ${m}`),
    });
    stops.push({ name: 'git host', stop: () => gitHost.close() });
    say(`git host on ${gitHost.url}, serving bare repositories under ${gitHost.reposDir}`);
    if (!config.services.gitea.url && config.services.gitea.embedded_port) {
      // The first start builds the forge in the background (setup starts it before the rest); the
      // stack is up meanwhile, and the worker and the API start once the forge has.
      if (!toolReady('gitea'))
        say('waiting for the embedded forge (Gitea) to finish building: the first start builds it once');
      await waitForTool('gitea');
      const giteaLog = createWriteStream(join(logDir, 'gitea.log'), { flags: 'a' });
      const forge = await startGitea({
        dir: join(data, 'gitea'),
        certsDir: join(data, 'certs'),
        host: config.git_host.host,
        port: config.services.gitea.embedded_port,
        onLog: (l) => giteaLog.write(`${l}\n`),
      });
      forge.process.once('exit', (code) => {
        if (!stopping) say(`Gitea exited unexpectedly (code ${code}); see ${join(logDir, 'gitea.log')}`);
      });
      stops.push({ name: 'forge', stop: () => forge.stop() });
      env.KUMOSS_GITEA_URL = forge.url;
      env.GITEA_TOKEN = forge.token;
      forgeUrl = forge.url;
      say(
        `forge (Gitea 1.27.3) on ${forge.url}: push to ${forge.url}/${forge.owner}/<repo>.git (token in ${join(data, 'gitea', 'token')})`,
      );
    }
    return gitHost;
  };
  // The components start side by side, each registering its stop once it is up; the worker and
  // the API start when all are. A failure stops what did start (allSettled: none is left behind).
  const [hosts, ...others] = await Promise.allSettled([
    hostsStarted(),
    temporalStarted(),
    storageStarted(),
    databaseStarted(),
    awsStarted(),
    ensureWebBuild({ log: say }),
  ]);
  const failure = [hosts, ...others].find((r) => r.status === 'rejected');
  if (failure || hosts.status === 'rejected') throw failure?.reason;
  const gitHost = hosts.value;
  // The embedded store's address is known once it has started.
  env.DATABASE_URL = databaseUrl(config);
  spawnService('worker', 'worker/main.ts', env, { logs: logDir, run: runDir });
  spawnService('api', 'api/main.ts', env, { logs: logDir, run: runDir });
  const apiUrl = `http://${config.api.host}:${config.api.port}`;
  const health = await waitForHealth(`${apiUrl}/health`, 120_000);
  // The default organization may name repositories on the embedded hosts (the API has migrated).
  await connectEmbeddedHosts(databaseUrl(config), [
    { origin: gitHost.url, kind: 'git' },
    ...(forgeUrl ? [{ origin: forgeUrl, kind: 'gitea' as const }] : []),
  ]);
  say(`git connections of organization "default": ${gitHost.url}${forgeUrl ? `, ${forgeUrl}` : ''}`);
  up = true;
  say('all components up:');
  for (const c of (health as { components: { name: string; detail: string }[] }).components) {
    say(`  ${c.name.padEnd(12)} ${c.detail}`);
  }
  say(`Temporal Web UI  ${uiUrl}`);
  say(`web application  ${apiUrl}/  (sign in with a token from \`npx kumoss user add\`)`);
  say(`API              ${apiUrl}  (health: ${apiUrl}/health)`);
  say(`git host         ${gitHost.url}  (CA: ${gitHost.caPath})`);
  if (forgeUrl) say(`forge (Gitea)    ${forgeUrl}  (pull requests with a page and a diff)`);
  // A build whose tool is ready may still be finishing (the forge's is up by now): not listed.
  const building = GO_TOOLS.filter((t) => buildingInBackground(t.name) && !toolReady(t.name)).map(
    (t) => `${t.name} ${t.version}`,
  );
  if (building.length > 0)
    say(
      `still building in the background (the first start only; logs in ${toolsDir()}): ${building.join(', ')} — a run that needs one waits for it`,
    );
  say('press Ctrl-C to stop');
}

process.once('SIGINT', () => void shutdown(0));
process.once('SIGTERM', () => void shutdown(0));
let config: KumossConfig;
try {
  config = loadConfig();
} catch (err) {
  console.error(`[kumoss] ${err instanceof ConfigError ? err.message : String(err)}`);
  process.exit(2);
}
main(config).catch(async (err: unknown) => {
  console.error(`[kumoss] cannot start: ${err instanceof PortTakenError ? err.message : String(err)}`);
  await shutdown(1);
});
