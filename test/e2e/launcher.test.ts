// The launcher supervises: `npm start`'s process (scripts/start.ts) on free ports and a data
// directory of its own; the worker is killed with SIGKILL in the middle of a round; the launcher
// starts it again by itself and the round completes, without anyone touching the stack. Ctrl-C
// (SIGINT) then stops everything with exit code 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitClient } from '../../activities/git';
import { embeddedDatabaseUrl, projectRoot } from '../../shared/infra/config';
import type { SessionRound } from '../../shared/contracts';
import { createDb, type Db } from '../../shared/infra/db';
import { createUser } from '../../shared/infra/db/users';
import { freePort } from '../../scripts/embedded/ports';
import { testCloudDir } from '../support/test-cloud';
import { createDriftTestBed, type DriftTestBed } from '../support/drift-test-bed';
import { engineDeps, untilActivityRunning } from '../support/stack';

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

describe('npm start supervises its processes', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'kumoss-launcher-'));
  const out = { text: '' };
  let launcher: ChildProcess;
  let ports: Record<string, number>;
  let db: Db;
  let bed: DriftTestBed | undefined;
  let connection: Connection | undefined;

  beforeAll(async () => {
    ports = {};
    for (const name of ['temporal', 'ui', 'api', 'db', 'git', 's3', 'aws', 'forge'])
      ports[name] = await freePort();
    launcher = spawn(process.execPath, ['--import', 'tsx', join(projectRoot, 'scripts/start.ts')], {
      cwd: projectRoot,
      env: {
        ...process.env,
        KUMOSS_DATA_DIR: dataDir,
        // The drift bed's local_file targets and local state stand for the cloud (test/support/test-cloud.ts).
        KUMOSS_ENGINE_SANDBOX_WRITABLE: testCloudDir(),
        TEMPORAL_ADDRESS: `127.0.0.1:${ports.temporal}`,
        KUMOSS_TEMPORAL_UI_URL: `http://127.0.0.1:${ports.ui}`,
        KUMOSS_API_PORT: String(ports.api),
        KUMOSS_DB_PORT: String(ports.db),
        KUMOSS_GIT_HOST_PORT: String(ports.git),
        S3_ENDPOINT: `http://127.0.0.1:${ports.s3}`,
        KUMOSS_AWS_EMULATOR_PORT: String(ports.aws),
        KUMOSS_GITEA_PORT: String(ports.forge),
        // A killed worker's activity is retried after this long without a heartbeat.
        KUMOSS_ACTIVITY_HEARTBEAT_SECONDS: '5',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [launcher.stdout, launcher.stderr])
      s?.on('data', (d: Buffer) => (out.text += d.toString()));
    await untilOutput(launcher, out, /press Ctrl-C to stop/);
    // As the CLI connects: the kumoss role, with the password the launcher keeps in the data directory.
    db = createDb(embeddedDatabaseUrl(dataDir, ports.db!));
  });
  afterAll(async () => {
    await bed?.destroy();
    await connection?.close();
    await db?.destroy();
    if (launcher && launcher.exitCode === null) launcher.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('restarts a worker killed mid-round, the round completes on its own, and Ctrl-C stops it all', async () => {
    const api = `http://127.0.0.1:${ports.api}`;
    // The default organization: the launcher registered its git host as a connection of it.
    const { token } = await createUser(db, {
      name: `devops-launcher-${Date.now()}`,
      role: 'devops',
      organization: 'default',
    });
    bed = await createDriftTestBed({
      gitHostUrl: `https://127.0.0.1:${ports.git}`,
      git: new GitClient({ caFile: join(dataDir, 'certs', 'ca.pem') }),
      engine: engineDeps(),
    });
    await bed.inject('ingress');
    await bed.inject('attribute');
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${api}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const accepted = await call('POST', '/api/v1/drift/full', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'launcher',
      text: 'Reconcile everything.',
    });
    expect(accepted.status).toBe(202);
    const sessionId = accepted.body.session_id as string;
    const roundId = accepted.body.round_id as string;

    connection = await Connection.connect({ address: `127.0.0.1:${ports.temporal}` });
    const client = new Client({ connection });
    const round = client.workflow.getHandle(`drift-round:${sessionId}:${roundId}`);
    await expect
      .poll(
        () =>
          round.describe().then(
            () => 'started',
            () => 'not yet',
          ),
        { timeout: 30_000 },
      )
      .toBe('started');
    await untilActivityRunning(round, 'planIteration', 120_000);
    const pidFile = join(dataDir, 'run', 'worker.pid');
    const killed = Number(readFileSync(pidFile, 'utf8'));
    process.kill(killed, 'SIGKILL');
    await untilOutput(launcher, out, /worker exited unexpectedly \(SIGKILL\); restarting in 1s/);

    const firstRound = async () =>
      ((await call('GET', `/api/v1/sessions/${sessionId}`)).body.rounds as SessionRound[])[0];
    await expect
      .poll(async () => (await firstRound())?.status, { timeout: 180_000, interval: 200 })
      .toMatch(/^(completed|uncompleted|failed)$/);
    expect(await firstRound()).toMatchObject({
      round_id: roundId,
      status: 'completed',
      outcome: 'Succeeded',
    });
    const restarted = Number(readFileSync(pidFile, 'utf8'));
    expect(restarted).not.toBe(killed);
    expect(() => process.kill(restarted, 0)).not.toThrow(); // the new worker is alive

    const exited = new Promise<number | null>((r) => launcher.once('exit', (code) => r(code)));
    launcher.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out.text).toMatch(/\[kumoss\] stopped/);
  });
});
