// `npm start`'s process (scripts/start.ts) on free ports and a data directory of its own, as the
// launcher test and the kill-and-resume benchmark run it: its output collected, its embedded store
// reached as the CLI reaches it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedDatabaseUrl, projectRoot } from '../../shared/infra/config';
import { createDb, type Db } from '../../shared/infra/db';
import { freeLowPort } from '../../scripts/embedded/ports';
import { testCloudDir } from './test-cloud';
import { toolReady } from '../../shared/infra/tools.mjs';

export interface Launcher {
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  out: { text: string };
  ports: Record<'temporal' | 'ui' | 'api' | 'db' | 'git' | 's3' | 'aws' | 'forge', number>;
  dataDir: string;
  db: Db;
  api: string;
  /** The worker process's pid as the launcher recorded it. */
  workerPid(): number;
  untilOutput(re: RegExp, timeoutMs?: number): Promise<void>;
  /** SIGINT, as Ctrl-C; resolves with the exit code. */
  interrupt(): Promise<number | null>;
  destroy(): Promise<void>;
}

/** Resolves when the launcher's output has a line matching `re` (rejects if it exits first). */
function untilOutput(
  child: ChildProcess,
  out: { text: string },
  re: RegExp,
  timeoutMs = 240_000,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`launcher did not print ${re} in time:\n${out.text.slice(-3000)}`)),
      timeoutMs,
    );
    const check = (): void => {
      if (re.test(out.text)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`launcher exited (${code}) before ${re}:\n${out.text.slice(-3000)}`));
    });
    check();
  });
}

export type LauncherPorts = Launcher['ports'];

/** Free loopback ports for each of the launcher's components. */
export async function launcherPorts(): Promise<LauncherPorts> {
  const ports = {} as LauncherPorts;
  // Below the kernel's ephemeral range: a launcher may bind them minutes later (after a first
  // setup), and any outgoing connection meanwhile can be given a port from that range.
  for (const name of ['temporal', 'ui', 'api', 'db', 'git', 's3', 'aws', 'forge'] as const)
    ports[name] = await freeLowPort();
  return ports;
}

/** The launcher's settings for its data directory and components' ports (the forge's as given). */
export function launcherEnv(
  dataDir: string,
  ports: LauncherPorts,
  forgePort: number,
): Record<string, string> {
  return {
    KUMOSS_DATA_DIR: dataDir,
    TEMPORAL_ADDRESS: `127.0.0.1:${ports.temporal}`,
    KUMOSS_TEMPORAL_UI_URL: `http://127.0.0.1:${ports.ui}`,
    KUMOSS_API_PORT: String(ports.api),
    KUMOSS_DB_PORT: String(ports.db),
    KUMOSS_GIT_HOST_PORT: String(ports.git),
    S3_ENDPOINT: `http://127.0.0.1:${ports.s3}`,
    KUMOSS_AWS_EMULATOR_PORT: String(ports.aws),
    KUMOSS_GITEA_PORT: String(forgePort),
  };
}

/** Starts the launcher and resolves once it says every component is up. */
export async function startLauncher(env: Record<string, string> = {}): Promise<Launcher> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kumoss-launcher-'));
  const ports = await launcherPorts();
  const child = spawn(process.execPath, ['--import', 'tsx', join(projectRoot, 'scripts/start.ts')], {
    cwd: projectRoot,
    env: {
      ...process.env,
      // The forge only when it is built: a test never waits for its first build (minutes).
      ...launcherEnv(dataDir, ports, toolReady('gitea') ? ports.forge : 0),
      // The drift bed's local_file targets and local state stand for the cloud (test/support/test-cloud.ts).
      KUMOSS_ENGINE_SANDBOX_WRITABLE: testCloudDir(),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { text: '' };
  for (const s of [child.stdout, child.stderr]) s?.on('data', (d: Buffer) => (out.text += d.toString()));
  try {
    await untilOutput(child, out, /press Ctrl-C to stop/);
  } catch (err) {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  // As the CLI connects: the kumoss role, with the password the launcher keeps in the data directory.
  const db = createDb(embeddedDatabaseUrl(dataDir, ports.db));
  return {
    child,
    out,
    ports,
    dataDir,
    db,
    api: `http://127.0.0.1:${ports.api}`,
    workerPid: () => Number(readFileSync(join(dataDir, 'run', 'worker.pid'), 'utf8')),
    untilOutput: (re, timeoutMs) => untilOutput(child, out, re, timeoutMs),
    interrupt: () => {
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGINT');
      return exited;
    },
    destroy: async () => {
      await db.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
