// Benchmark: runner.environment-drift-detect across 100 runner groups started together, against
// 100 detections one after another — measured side by side in one run on the real stack (Temporal
// dev server, moto_server, the loopback Google APIs, the metadata store; one worker).
import { randomUUID } from 'node:crypto';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { quietKnownWarnings } from '../shared/infra/logger';
import type { RunnerDagState } from '../shared/runner-contracts';
import {
  awsEnvironment,
  cloudRunEnvironment,
  gceEnvironment,
  provisionAws,
  provisionGcp,
  startRunnerBed,
} from '../test/support/runner-bed';
import { startStackWorker, startTestStack } from '../test/support/test-stack';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('WARN') });
const GROUPS = Number(process.env.BENCH_GROUPS ?? 100);

const { stack, stop } = await startTestStack();
stopOnSignal(stop);
const bed = await startRunnerBed(stack.databaseUrl);
const sw = await startStackWorker(stack, 'bench-runner', { runners: bed.deps });
try {
  const org = await bed.organization();
  const aws = await bed.connection(org, 'aws');
  const gcp = await bed.connection(org, 'gcp');
  // A realistic mix: half ECS, a quarter GCE, a quarter Cloud Run; one in five drifted.
  const groups: string[] = [];
  for (let i = 0; i < GROUPS; i++) {
    if (i % 4 < 2) {
      const env = awsEnvironment();
      if (i % 5 !== 0) await provisionAws(bed.awsClients(aws.region), env);
      groups.push((await bed.group(org, aws, env)).runner_group_uuid);
    } else {
      const env = i % 4 === 2 ? gceEnvironment() : cloudRunEnvironment();
      if (i % 5 !== 0) await provisionGcp(bed.gcpClient, gcp, env);
      groups.push((await bed.group(org, gcp, env)).runner_group_uuid);
    }
  }
  const detect = (group: string) =>
    sw.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: 'bench-runner',
      workflowId: `bench-${randomUUID()}`,
      args: [{ runner_group_uuid: group, organization_uuid: org }],
    }) as Promise<RunnerDagState>;

  // Warm-up: bundle loaded, clients connected.
  await detect(groups[0] ?? '');

  let t0 = performance.now();
  const one: number[] = [];
  for (const g of groups) {
    const t = performance.now();
    await detect(g);
    one.push(performance.now() - t);
  }
  const sequentialMs = performance.now() - t0;

  t0 = performance.now();
  const results = await Promise.all(groups.map(detect));
  const concurrentMs = performance.now() - t0;

  const sorted = [...one].sort((a, b) => a - b);
  const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const clean = results.filter((r) => r.plan_status === 'clean').length;
  console.log(`runner.environment-drift-detect, ${GROUPS} runner groups, one worker, 2 cores`);
  console.log(`  one detection:            p50 ${p(0.5).toFixed(0)} ms, p95 ${p(0.95).toFixed(0)} ms`);
  console.log(`  ${GROUPS} x one, in sequence:  ${(sequentialMs / 1000).toFixed(1)} s`);
  console.log(`  ${GROUPS} started together:    ${(concurrentMs / 1000).toFixed(1)} s`);
  console.log(`  speed-up together/sequence: ${(sequentialMs / concurrentMs).toFixed(1)}x`);
  console.log(
    `  plans: ${clean} clean, ${GROUPS - clean} drifted (expected ${GROUPS - Math.ceil(GROUPS / 5)} clean)`,
  );
  console.log(
    `BENCH_RUNNER ${JSON.stringify({
      runner_detect_p50_ms: Math.round(p(0.5)),
      runner_detect_p95_ms: Math.round(p(0.95)),
      runner_concurrency_speedup: Number((sequentialMs / concurrentMs).toFixed(2)),
    })}`,
  );
} finally {
  await sw.stop();
  await bed.close();
  await stop();
}
