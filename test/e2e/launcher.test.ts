// The launcher supervises: `npm start`'s process (scripts/start.ts) on free ports and a data
// directory of its own, with the shipped heartbeat timeout; the worker is killed with SIGKILL in the
// middle of a round; the launcher starts it again by itself and the round completes, without anyone
// touching the stack. Ctrl-C (SIGINT) then stops everything with exit code 0.
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitClient } from '../../activities/git';
import type { SessionRound } from '../../shared/contracts';
import { createUser } from '../../shared/infra/db/users';
import { createDriftTestBed, type DriftTestBed } from '../support/drift-test-bed';
import { startObjectApi, type ObjectApi } from '../../scripts/embedded/object-api';
import { startLauncher, type Launcher } from '../support/launcher';
import { engineDeps, untilActivityRunning } from '../support/stack';

describe('npm start supervises its processes', () => {
  let launcher: Launcher;
  let bed: DriftTestBed | undefined;
  let connection: Connection | undefined;

  let objectApi: ObjectApi;

  beforeAll(async () => {
    // The bed's cloud API is up first: the workers' engines are told they may reach it.
    objectApi = await startObjectApi();
    launcher = await startLauncher({ KUMOSS_ENGINE_EGRESS_ALLOW: objectApi.url });
  });
  afterAll(async () => {
    await bed?.destroy();
    await connection?.close();
    await launcher?.destroy();
  });

  it('restarts a worker killed mid-round, the round completes on its own, and Ctrl-C stops it all', async () => {
    // The default organization: the launcher registered its git host as a connection of it.
    const { token } = await createUser(launcher.db, {
      name: `devops-launcher-${Date.now()}`,
      role: 'devops',
      organization: 'default',
    });
    bed = await createDriftTestBed({
      gitHostUrl: `https://127.0.0.1:${launcher.ports.git}`,
      git: new GitClient({ caFile: join(launcher.dataDir, 'certs', 'ca.pem') }),
      engine: engineDeps(),
      objectApi,
    });
    await bed.inject('ingress');
    await bed.inject('attribute');
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${launcher.api}${path}`, {
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

    connection = await Connection.connect({ address: `127.0.0.1:${launcher.ports.temporal}` });
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
    const killed = launcher.workerPid();
    process.kill(killed, 'SIGKILL');
    await launcher.untilOutput(/worker exited unexpectedly \(SIGKILL\); restarting in 1s/);

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
    const restarted = launcher.workerPid();
    expect(restarted).not.toBe(killed);
    expect(() => process.kill(restarted, 0)).not.toThrow(); // the new worker is alive

    expect(await launcher.interrupt()).toBe(0);
    expect(launcher.out.text).toMatch(/\[kumoss\] stopped/);
  });
});
