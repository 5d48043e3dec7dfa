// Benchmark (b): orchestration overhead of a full drift round — the round's wall time over the sum
// of its engine (terraform) and model calls, on the real stack. Target: <= 1.10.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { OfflineModel } from '../activities/model/offline';
import type { ModelProvider } from '../activities/model/port';
import { cliConfigPath, toolPath } from '../shared/tools.mjs';
import { quietKnownWarnings } from '../shared/logger';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStack } from '../test/support/test-stack';
import type { DriftRoundResult } from '../shared/contracts';
import { driftRound } from '../workflows';

/** Time the round's activities spent running and waiting to be picked up, from its history. */
async function activityTimes(client: Client, workflowId: string) {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
  const scheduled = new Map<string, number>();
  const started = new Map<string, number>();
  let running = 0;
  let queued = 0;
  let count = 0;
  for (const e of history.events ?? []) {
    const id = String(e.eventId);
    if (e.activityTaskScheduledEventAttributes) scheduled.set(id, ms(e.eventTime));
    if (e.activityTaskStartedEventAttributes) {
      const s = String(e.activityTaskStartedEventAttributes.scheduledEventId);
      started.set(s, ms(e.eventTime));
      queued += ms(e.eventTime) - (scheduled.get(s) ?? ms(e.eventTime));
    }
    const done = e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes;
    if (done) {
      const s = String(done.scheduledEventId);
      running += ms(e.eventTime) - (started.get(s) ?? ms(e.eventTime));
      count += 1;
    }
  }
  return { running, queued, count };
}

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('WARN') });
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

let engineMs = 0;
let modelMs = 0;
let engineCalls = 0;

/** Times every model call of the wrapped provider. */
function timed(model: ModelProvider): ModelProvider {
  const wrap =
    <A, R>(fn: (a: A) => Promise<R>) =>
    async (a: A): Promise<R> => {
      const t0 = performance.now();
      try {
        return await fn(a);
      } finally {
        modelMs += performance.now() - t0;
      }
    };
  return {
    name: model.name,
    filterRequest: wrap((a) => model.filterRequest(a)),
    selectTargets: wrap((a) => model.selectTargets(a)),
    remediate: wrap((a) => model.remediate(a)),
    summarize: wrap((a) => model.summarize(a)),
    pullRequest: wrap((a) => model.pullRequest(a)),
  };
}

const { stack, stop } = await startTestStack();
try {
  const sw = await startStackWorker(stack, 'bench', {
    model: timed(new OfflineModel()),
    onEngineCall: (c) => {
      engineMs += c.durationMs;
      engineCalls += 1;
    },
  });
  const { client, git } = sw;
  const plainEngine = {
    kind: 'terraform' as const,
    binary: toolPath('terraform'),
    cliConfigFile: cliConfigPath(),
  };
  console.log('full drift round (2 drifted resources, offline model), terraform 1.5.7, real stack');
  console.log('round  wall ms  engine ms (calls)  model ms  overhead ratio');
  const ratios: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git, engine: plainEngine });
    await bed.inject('attribute');
    await bed.inject('ingress');
    engineMs = 0;
    modelMs = 0;
    engineCalls = 0;
    const t0 = performance.now();
    const workflowId = `bench-${randomUUID()}`;
    const result: DriftRoundResult = await client.workflow.execute(driftRound, {
      taskQueue: 'bench',
      workflowId,
      args: [
        {
          session_id: `b-${randomUUID().slice(0, 8)}`,
          round_id: 'r1',
          mode: 'full',
          repository_url: bed.repoUrl,
          cloud: 'aws',
          scope_id: 'bench',
          text: 'Reconcile everything.',
        },
      ],
    });
    const wall = performance.now() - t0;
    const ratio = wall / (engineMs + modelMs);
    ratios.push(ratio);
    const split = await activityTimes(client, workflowId);
    console.log(
      `${String(r).padStart(5)}  ${wall.toFixed(0).padStart(7)}  ${`${engineMs.toFixed(0)} (${engineCalls})`.padStart(17)}  ${modelMs.toFixed(1).padStart(8)}  ${ratio.toFixed(2).padStart(14)}  ${result.outcome ?? ''}`,
    );
    console.log(
      `       inside activities ${split.running.toFixed(0)} ms (${split.count} activities; engine and model included), waiting to start ${split.queued.toFixed(0)} ms`,
    );
    await bed.destroy();
  }
  const sorted = [...ratios].sort((a, b) => a - b);
  console.log(
    `median overhead ratio: ${(sorted[Math.floor(sorted.length / 2)] ?? NaN).toFixed(2)} (target <= 1.10)`,
  );
  await sw.stop();
} finally {
  await stop();
}
