// Benchmark: recovery from a killed worker under `npm start`. The launcher runs the whole system
// with its shipped settings (heartbeat timeout orchestration.activity_heartbeat_seconds); a full
// drift round on the drift test bed runs once undisturbed, then once per kill point with the worker
// SIGKILLed while that activity runs. Prints, per point, the time from the kill until the killed
// activity runs again on the restarted worker (the resume) and what the kill added to the round's
// wall time; `kill_resume_s` is the worst resume.
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { GitClient } from '../activities/git';
import type { SessionRound } from '../shared/contracts';
import { driftRoundWorkflowId } from '../shared/ids';
import { createUser } from '../shared/infra/db/users';
import { quietKnownWarnings } from '../shared/infra/logger';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startLauncher } from '../test/support/launcher';
import { engineDeps } from '../test/support/stack';

quietKnownWarnings();
const POINTS = ['planIteration', 'generateRemediation', 'validateRemediation'];
const STARTED = proto.temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;

const launcher = await startLauncher();
const connection = await Connection.connect({ address: `127.0.0.1:${launcher.ports.temporal}` });
const client = new Client({ connection });
const bed = await createDriftTestBed({
  gitHostUrl: `https://127.0.0.1:${launcher.ports.git}`,
  git: new GitClient({ caFile: join(launcher.dataDir, 'certs', 'ca.pem') }),
  engine: engineDeps(),
});
try {
  await bed.inject('ingress');
  await bed.inject('attribute');
  const { token } = await createUser(launcher.db, {
    name: `devops-bench-${Date.now()}`,
    role: 'devops',
    organization: 'default',
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${launcher.api}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as Record<string, unknown>;
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Runs one full round; with `kill`, SIGKILLs the worker while that activity runs. */
  async function round(kill?: string) {
    const t0 = performance.now();
    const accepted = await call('POST', '/api/v1/drift/full', {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: `kill-${kill ?? 'none'}`,
      text: 'Reconcile everything.',
    });
    const sessionId = accepted.session_id as string;
    const handle = client.workflow.getHandle(driftRoundWorkflowId(sessionId, accepted.round_id as string));
    let resumeS: number | undefined;
    if (kill) {
      // Wait for the activity to run, kill the worker, then wait for its next attempt to run.
      let killedAt = 0;
      for (let i = 0; i < 6000 && !killedAt; i++) {
        const pending = await handle.describe().then(
          (d) => d.raw.pendingActivities ?? [],
          () => [],
        );
        if (pending.some((a) => a.activityType?.name === kill && a.state === STARTED)) {
          process.kill(launcher.workerPid(), 'SIGKILL');
          killedAt = performance.now();
        } else await sleep(25);
      }
      if (!killedAt) throw new Error(`${kill} never ran`);
      for (;;) {
        const d = await handle.describe();
        const again = (d.raw.pendingActivities ?? []).find((a) => a.activityType?.name === kill);
        if (!again || (again.state === STARTED && (again.attempt ?? 1) > 1) || d.status.name !== 'RUNNING') {
          resumeS = (performance.now() - killedAt) / 1000;
          break;
        }
        await sleep(50);
      }
    }
    for (;;) {
      const rounds = (await call('GET', `/api/v1/sessions/${sessionId}`)).rounds as
        SessionRound[] | undefined;
      const r = rounds?.[0];
      if (r && ['completed', 'uncompleted', 'failed'].includes(r.status)) {
        if (r.outcome !== 'Succeeded')
          throw new Error(`round ${r.round_id} ended ${r.status} ${r.outcome ?? ''}`);
        break;
      }
      await sleep(100);
    }
    return { wallS: (performance.now() - t0) / 1000, resumeS };
  }

  const reference = await round();
  console.log(`undisturbed round: ${reference.wallS.toFixed(1)} s`);
  const figures: Record<string, number> = { kill_reference_round_s: Number(reference.wallS.toFixed(1)) };
  let worst = 0;
  for (const point of POINTS) {
    const r = await round(point);
    const resume = r.resumeS ?? 0;
    worst = Math.max(worst, resume);
    console.log(
      `killed during ${point}: resumed ${resume.toFixed(1)} s after the kill; round ${r.wallS.toFixed(1)} s (+${(r.wallS - reference.wallS).toFixed(1)} s)`,
    );
    figures[`kill_${point}_resume_s`] = Number(resume.toFixed(1));
    figures[`kill_${point}_extra_s`] = Number((r.wallS - reference.wallS).toFixed(1));
  }
  figures.kill_resume_s = Number(worst.toFixed(1));
  console.log(`BENCH_KILL_RESUME ${JSON.stringify(figures)}`);
} finally {
  await bed.destroy();
  await connection.close();
  await launcher.destroy();
}
