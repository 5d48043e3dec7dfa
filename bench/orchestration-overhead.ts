// Benchmark (b): orchestration overhead of a full drift round — the round's wall time over the sum
// of its engine (terraform) and model calls, on the real stack. Target: <= 1.10.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { OfflineModel } from '../activities/model/offline';
import type { ModelProvider } from '../activities/model/port';
import { cliConfigPath, toolPath } from '../shared/infra/tools.mjs';
import { quietKnownWarnings } from '../shared/infra/logger';
import { APP_CONFIG, SG_WEB_DEMO, createDriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStackProcess } from '../test/support/test-stack';
import type { DriftRoundResult } from '../shared/contracts';
import { driftRound } from '../workflows';
import { EngineTimes } from './engine-busy';
import { stopOnSignal } from './stop-on-signal';

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
  const names = new Map<string, string>();
  const lines: { at: number; text: string }[] = [];
  for (const e of history.events ?? []) {
    const id = String(e.eventId);
    if (e.activityTaskScheduledEventAttributes) {
      scheduled.set(id, ms(e.eventTime));
      names.set(id, e.activityTaskScheduledEventAttributes.activityType?.name ?? '?');
    }
    if (e.workflowTaskStartedEventAttributes) lines.push({ at: ms(e.eventTime), text: 'workflow task' });
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
      const at = scheduled.get(s) ?? 0;
      lines.push({
        at,
        text: `${names.get(s)} queued ${((started.get(s) ?? at) - at).toFixed(0)} ms, ran ${(ms(e.eventTime) - (started.get(s) ?? at)).toFixed(0)} ms`,
      });
    }
  }
  return { running, queued, count, lines };
}

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('WARN') });
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

let modelMs = 0;
const engine = new EngineTimes();

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
    generate: wrap((a) => model.generate(a)),
    summarize: wrap((a) => model.summarize(a)),
    pullRequest: wrap((a) => model.pullRequest(a)),
  };
}

// The stack runs in a process of its own: this process holds the worker being measured (and the
// drift bed's REST API, the "cloud"), as a production worker holds only itself.
const { stack, stop } = await startTestStackProcess();
stopOnSignal(stop);
const figures: Record<string, number> = {};
try {
  const sw = await startStackWorker(stack, 'bench', {
    model: timed(new OfflineModel()),
    onEngineCall: engine.record,
  });
  const { client, git } = sw;
  const plainEngine = {
    kind: 'terraform' as const,
    binary: toolPath('terraform'),
    cliConfigFile: cliConfigPath(),
  };
  /** One full round; prints its line and returns its overhead ratio. */
  const round = async (label: string, repoUrl: string, sessionId: string, roundId: string) => {
    modelMs = 0;
    engine.reset();
    const t0 = performance.now();
    const workflowId = `bench-${randomUUID()}`;
    const result: DriftRoundResult = await client.workflow.execute(driftRound, {
      taskQueue: 'bench',
      workflowId,
      args: [
        {
          session_id: sessionId,
          round_id: roundId,
          mode: 'full',
          repository_url: repoUrl,
          cloud: 'aws',
          scope_id: 'bench',
          text: 'Reconcile everything.',
        },
      ],
    });
    const wall = performance.now() - t0;
    const busy = engine.busyMs();
    const ratio = wall / (busy + modelMs);
    const split = await activityTimes(client, workflowId);
    console.log(
      `${label.padEnd(22)}  ${wall.toFixed(0).padStart(7)}  ${`${busy.toFixed(0)} (${engine.calls}, sum ${engine.sumMs.toFixed(0)})`.padStart(24)}  ${modelMs.toFixed(1).padStart(8)}  ${ratio.toFixed(2).padStart(14)}  ${result.outcome ?? ''} ${result.remediated.length} remediated`,
    );
    console.log(
      `${''.padEnd(24)}inside activities ${split.running.toFixed(0)} ms (${split.count} activities), waiting to start ${split.queued.toFixed(0)} ms`,
    );
    if (process.env.BENCH_TIMELINE) {
      // Activities (from the history) and engine calls (from the hook) on one clock, from the start.
      const origin = performance.timeOrigin;
      const rows = [
        ...split.lines.map((l) => ({ at: l.at - origin - t0, text: l.text })),
        ...engine.log.map((c) => ({
          at: c.start - t0,
          text: `  engine ${c.args.slice(0, 2).join(' ')} ${(c.end - c.start).toFixed(0)} ms`,
        })),
      ].sort((a, b) => a.at - b.at);
      for (const r of rows) console.log(`${''.padEnd(24)}${r.at.toFixed(0).padStart(6)}  ${r.text}`);
    }
    if (result.outcome !== 'Succeeded') throw new Error(`${label}: outcome ${result.outcome}`);
    return { ratio, sumRatio: wall / (engine.sumMs + modelMs), wall };
  };
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

  console.log('full drift rounds (2 drifted resources, offline model), terraform 1.5.7, real stack');
  console.log('round                   wall ms  engine busy ms (calls, sum)  model ms  overhead ratio');
  // (1) The first round of a session: the worker clones the repository.
  const first: { ratio: number; sumRatio: number; wall: number }[] = [];
  for (let r = 1; r <= rounds; r++) {
    const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git, engine: plainEngine });
    await bed.inject('attribute');
    await bed.inject('ingress');
    first.push(await round(`session ${r}, round 1`, bed.repoUrl, `b-${randomUUID().slice(0, 8)}`, 'r1'));
    await bed.destroy();
  }
  // (2) Later rounds of one session: the worker fetches into its checkout of the session.
  const later: typeof first = [];
  const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git, engine: plainEngine });
  const session = `b-${randomUUID().slice(0, 8)}`;
  for (let r = 1; r <= rounds + 1; r++) {
    // New drift on both objects each round: the round before reconciled the code with the last.
    await bed.api.put(APP_CONFIG.id, { ...APP_CONFIG, replicas: 4 + r });
    await bed.api.put(SG_WEB_DEMO.id, {
      ...SG_WEB_DEMO,
      ingress: [
        ...SG_WEB_DEMO.ingress,
        { protocol: 'tcp', from_port: 8000 + r, to_port: 8000 + r, cidr_blocks: ['0.0.0.0/0'] },
      ],
    });
    const ratio = await round(`one session, round ${r}`, bed.repoUrl, session, `r${r}`);
    if (r > 1) later.push(ratio);
  }
  await bed.destroy();
  const all = [...first, ...later];
  figures.round_overhead_first_ratio = median(first.map((r) => r.ratio));
  figures.round_overhead_later_ratio = median(later.map((r) => r.ratio));
  figures.round_overhead_ratio = median(all.map((r) => r.ratio));
  figures.round_overhead_sum_ratio = median(all.map((r) => r.sumRatio));
  figures.round_wall_ms = median(all.map((r) => r.wall));
  console.log(
    `median overhead ratio: ${figures.round_overhead_ratio.toFixed(2)} over ${first.length + later.length} rounds ` +
      `(a session's first round ${figures.round_overhead_first_ratio.toFixed(2)}, its later rounds ` +
      `${figures.round_overhead_later_ratio.toFixed(2)}; target <= 1.10); over the sum of the engine calls ` +
      `${figures.round_overhead_sum_ratio.toFixed(2)}; round wall time ${figures.round_wall_ms.toFixed(0)} ms`,
  );
  await sw.stop();
} finally {
  await stop();
}
console.log(`BENCH_OVERHEAD ${JSON.stringify(figures)}`);
