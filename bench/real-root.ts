// Benchmark: full drift rounds on a real-shaped AWS root of 1,000 resources — 10 root files
// (security groups with ingress blocks, tagged buckets, IAM roles with jsonencode policies,
// instances) and 4 local modules — applied with kumoss/aws into moto, 50 resources drifted through
// the AWS APIs. Three rounds (each on a session of its own) between plans of the whole root, the
// yardstick: prints each round's wall time, how much of it the engine took and its ratio to the
// plans beside it, the median round's figures, the drift derivation time on a round's own plan, and
// the peak memory of the process running the worker.
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateTagsCommand,
  ModifyInstanceAttributeCommand,
} from '@aws-sdk/client-ec2';
import { UpdateAssumeRolePolicyCommand } from '@aws-sdk/client-iam';
import { PutBucketTaggingCommand } from '@aws-sdk/client-s3';
import { EngineClient, type EngineCall } from '../activities/engine';
import { OfflineModel } from '../activities/model/offline';
import { readPlanForDrift } from '../activities/plan-reader';
import { GitClient } from '../activities/git';
import type { DriftRoundInput, DriftRoundResult } from '../shared/contracts';
import { deriveDrift } from '../shared/drift';
import { driftRoundWorkflowId, roundArtifactKey } from '../shared/ids';
import { quietKnownWarnings } from '../shared/infra/logger';
import { testCloudDir } from '../test/support/test-cloud';
import { awsClients, trustPolicy } from '../test/support/aws-test-bed';
import { startStackWorker, startTestStackProcess, stackEngineDeps } from '../test/support/test-stack';
import { EngineTimes } from './engine-busy';
import { activityTimeline } from './event-path';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
const FILES = 10;
const MODULES = 4;
const PER_MODULE = 50;
/** The wider `-parallelism` the yardstick plan is timed with beside the engine's default (10). */
const PLAN_PARALLELISM = 30;
/**
 * Rounds run, each on a session of its own, between yardstick plans (`BENCH_REAL_ROOT_ROUNDS`,
 * default 3): the figures are the median round's, every round's printed.
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_REAL_ROOT_ROUNDS ?? 3));
/**
 * How much later than the offline model each remediation is answered (`BENCH_REAL_ROOT_MODEL_MS`,
 * default 0): a hosted model answers in seconds, and a group's targeted plan runs beside the next
 * group's answer. The table's figure is the offline model's.
 */
const MODEL_MS = Number(process.env.BENCH_REAL_ROOT_MODEL_MS ?? 0);
// Each root file: 40 security groups, 20 buckets, 10 roles, 10 instances (80; with the modules, 1,000).
const AMI = 'ami-03cf127a';
const s = randomUUID().slice(0, 6);

const sg = (name: string, port: number) => `resource "aws_security_group" "${name}" {
  name        = "${name}-${s}"
  description = "${name}"

  ingress {
    from_port   = ${port}
    to_port     = ${port}
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }

  tags = {
    Name = "${name}"
    Team = "platform"
  }
}
`;
const bucket = (name: string) => `resource "aws_s3_bucket" "${name}" {
  bucket = "${name.replace(/_/g, '-')}-${s}"

  tags = {
    Team = "data"
  }
}
`;
const role = (name: string) => `resource "aws_iam_role" "${name}" {
  name = "${name}-${s}"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}
`;
const instance = (name: string) => `resource "aws_instance" "${name}" {
  ami           = "${AMI}"
  instance_type = "t3.micro"
}
`;

function writeRoot(dir: string, statePath: string): void {
  writeFileSync(
    join(dir, 'main.tf'),
    `terraform {
  required_providers {
    aws = {
      source  = "kumoss/aws"
      version = "0.1.0"
    }
  }
  backend "local" {
    path = "${statePath}"
  }
}

provider "aws" {
  region = "us-east-1"
}
${Array.from({ length: MODULES }, (_, m) => `\nmodule "m${m}" {\n  source = "./modules/m${m}"\n}\n`).join('')}`,
  );
  for (let f = 0; f < FILES; f++) {
    const parts: string[] = [];
    for (let i = 0; i < 40; i++) parts.push(sg(`sg_${f}_${i}`, 1000 + i));
    for (let i = 0; i < 20; i++) parts.push(bucket(`b_${f}_${i}`));
    for (let i = 0; i < 10; i++) parts.push(role(`r_${f}_${i}`));
    for (let i = 0; i < 10; i++) parts.push(instance(`i_${f}_${i}`));
    writeFileSync(join(dir, `file${f}.tf`), parts.join('\n'));
  }
  for (let m = 0; m < MODULES; m++) {
    const md = join(dir, 'modules', `m${m}`);
    mkdirSync(md, { recursive: true });
    writeFileSync(
      join(md, 'versions.tf'),
      'terraform {\n  required_providers {\n    aws = {\n      source = "kumoss/aws"\n    }\n  }\n}\n',
    );
    writeFileSync(
      join(md, 'main.tf'),
      Array.from({ length: PER_MODULE }, (_, i) => sg(`m${m}_sg_${i}`, 2000 + i)).join('\n'),
    );
  }
}

async function main(): Promise<void> {
  const { stack, stop } = await startTestStackProcess();
  stopOnSignal(stop);
  // Under the test cloud's directory: the engine sandbox lets the engine write the root's local
  // state there (and nowhere else outside its checkout).
  const work = mkdtempSync(join(testCloudDir(), 'bench-root-'));
  try {
    const repo = join(work, 'repo');
    mkdirSync(repo, { recursive: true });
    writeRoot(repo, join(work, 'terraform.tfstate'));
    writeFileSync(join(repo, '.gitignore'), '.terraform/\n.terraform.lock.hcl\n');
    const engineDeps = stackEngineDeps('terraform', stack.awsEndpoint);
    const engine = new EngineClient({ ...engineDeps, workdir: repo, scopeId: 'bench' });
    const t0 = performance.now();
    await engine.init();
    await engine.apply({ parallelism: 10 });
    console.log(
      `applied 1000 resources (${FILES} files, ${MODULES} modules) into moto in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const stateFile = join(work, 'state.json');
    await engine.stateJson(stateFile);
    const state = JSON.parse((await import('node:fs')).readFileSync(stateFile, 'utf8')) as {
      values: {
        root_module: {
          resources: { address: string; values: { id: string } }[];
          child_modules?: { resources: { address: string; values: { id: string } }[] }[];
        };
      };
    };
    const ids = new Map<string, string>();
    for (const r of state.values.root_module.resources) ids.set(r.address, r.values.id);
    for (const c of state.values.root_module.child_modules ?? [])
      for (const r of c.resources) ids.set(r.address, r.values.id);
    const id = (a: string) => ids.get(a) as string;

    const git = new GitClient({ caFile: stack.gitCaFile });
    const repoUrl = `${stack.gitHostUrl}/bench-root-${s}.git`;
    for (const args of [
      ['init', '--quiet', '--initial-branch=main'],
      ['add', '--all'],
      ['commit', '--quiet', '-m', 'root'],
      ['push', '--quiet', repoUrl, 'main'],
    ])
      await git.run(args, repo);

    // 50 drifted resources: 20 rules opened, 10 bucket tags, 10 trust policies, 5 instance types, 5 module groups.
    const aws = awsClients(stack.awsEndpoint);
    for (let i = 0; i < 20; i++)
      await aws.ec2.send(
        new AuthorizeSecurityGroupIngressCommand({
          GroupId: id(`aws_security_group.sg_${i % FILES}_${i}`),
          IpPermissions: [
            { IpProtocol: 'tcp', FromPort: 8080, ToPort: 8080, IpRanges: [{ CidrIp: '0.0.0.0/0' }] },
          ],
        }),
      );
    for (let i = 0; i < 10; i++)
      await aws.s3.send(
        new PutBucketTaggingCommand({
          Bucket: id(`aws_s3_bucket.b_${i}_${i}`),
          Tagging: { TagSet: [{ Key: 'Team', Value: 'analytics' }] },
        }),
      );
    for (let i = 0; i < 10; i++)
      await aws.iam.send(
        new UpdateAssumeRolePolicyCommand({
          RoleName: id(`aws_iam_role.r_${i}_${i}`),
          PolicyDocument: trustPolicy('lambda.amazonaws.com'),
        }),
      );
    for (let i = 0; i < 5; i++)
      await aws.ec2.send(
        new ModifyInstanceAttributeCommand({
          InstanceId: id(`aws_instance.i_${i}_${i}`),
          InstanceType: { Value: 't3.large' },
        }),
      );
    for (let i = 0; i < 5; i++)
      await aws.ec2.send(
        new CreateTagsCommand({
          Resources: [id(`module.m${i % MODULES}.aws_security_group.m${i % MODULES}_sg_${i}`)],
          Tags: [{ Key: 'Team', Value: 'edge' }],
        }),
      );

    // The yardstick: one plan of the whole drifted root, with the engine's default parallelism
    // (10) — and, side by side, with more graph walkers at once.
    /** Every yardstick plan with the default parallelism, in order. */
    const plans: number[] = [];
    const timedPlan = async (parallelism?: number) => {
      const p0 = performance.now();
      await engine.plan({ out: join(work, 'one.tfplan'), ...(parallelism ? { parallelism } : {}) });
      const took = (performance.now() - p0) / 1000;
      if (!parallelism) plans.push(took);
      return took;
    };
    // Alternated, twice each (default, wide, default, wide): neither runs only on a cold cache.
    const defaults: number[] = [];
    const wides: number[] = [];
    for (let r = 0; r < 2; r++) {
      defaults.push(await timedPlan());
      wides.push(await timedPlan(PLAN_PARALLELISM));
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const onePlanS = mean(defaults);
    const widePlanS = mean(wides);
    console.log(
      `one whole-root plan of the drifted root: ${onePlanS.toFixed(1)} s (${defaults.map((x) => x.toFixed(1)).join(', ')}); -parallelism=${PLAN_PARALLELISM}: ${widePlanS.toFixed(1)} s (${wides.map((x) => x.toFixed(1)).join(', ')})`,
    );

    const taskQueue = `bench-real-root-${s}`;
    // Each round's engine calls, reported as they end (the worker's hook) into the current round's.
    let current: { calls: EngineCall[]; ends: number[]; times: EngineTimes; t0: number } | undefined;
    const worker = await startStackWorker(stack, taskQueue, {
      ...(MODEL_MS > 0
        ? {
            model: new (class extends OfflineModel {
              override async remediate(i: Parameters<OfflineModel['remediate']>[0]) {
                await new Promise((resolve) => setTimeout(resolve, MODEL_MS));
                return super.remediate(i);
              }
            })(),
          }
        : {}),
      onEngineCall: (c) => {
        if (!current) return;
        current.calls.push(c);
        current.ends.push(performance.now() - current.t0);
        current.times.record(c);
      },
    });
    let peak = process.memoryUsage().rss;
    const base = peak;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    /**
     * One round on a session of its own (a branch from `main`: the same 50 drifts each time), with
     * its figures printed; the yardstick plan after it.
     */
    const runRound = async (n: number) => {
      const input: DriftRoundInput = {
        session_id: `bench-${s}-${n}`,
        round_id: 'r1',
        mode: 'full',
        repository_url: repoUrl,
        cloud: 'aws',
        scope_id: 'bench',
        text: 'Reconcile the whole root.',
      };
      const round = { calls: [] as EngineCall[], ends: [] as number[], times: new EngineTimes(), t0: 0 };
      current = round;
      const workflowId = driftRoundWorkflowId(input.session_id, input.round_id);
      round.t0 = performance.now();
      const result = (await worker.client.workflow.execute('driftRound', {
        taskQueue,
        workflowId,
        args: [input],
      })) as DriftRoundResult;
      const wall = (performance.now() - round.t0) / 1000;
      current = undefined;
      const timeline = await activityTimeline(worker.client, workflowId);
      const { calls, ends } = round;
      // Busy time, not the sum: validate and plan run side by side.
      const engineMs = round.times.busyMs();
      const byVerb = new Map<string, { n: number; ms: number }>();
      for (const c of calls) {
        // A plan of some addresses (a group's validation) apart from the plans of the whole root.
        const verb =
          c.args[0] === 'plan' && c.args.some((a) => a.startsWith('-target='))
            ? 'plan -target'
            : (c.args[0] ?? '');
        const v = byVerb.get(verb) ?? { n: 0, ms: 0 };
        byVerb.set(verb, { n: v.n + 1, ms: v.ms + c.durationMs });
      }
      console.log(
        `round ${n}: ${result.status}, outcome ${result.outcome}, ${result.remediated.length} remediated, ${result.unreconciled_count} unreconciled, ${result.iterations} iteration(s)`,
      );
      console.log(
        `  wall time ${wall.toFixed(1)} s; engine processes running ${(engineMs / 1000).toFixed(1)} s (sum of the calls ${(round.times.sumMs / 1000).toFixed(1)} s; busy time ${((engineMs / 1000 / wall) * 100).toFixed(0)}% of it): ${[...byVerb].map(([v, x]) => `${v} ×${x.n} ${(x.ms / 1000).toFixed(1)} s`).join(', ')}`,
      );
      console.log(
        `  activities, scheduled to completed: ${[...timeline.byType]
          .sort((a, b) => b[1].ms - a[1].ms)
          .map(([t, x]) => `${t} ×${x.n} ${(x.ms / 1000).toFixed(1)} s`)
          .join(
            ', ',
          )}; no main-path activity under way for ${(timeline.idleMs / 1000).toFixed(1)} s of ${(timeline.wallMs / 1000).toFixed(1)} s; ${(timeline.besideMs / 1000).toFixed(1)} s of activity time beside another (a group's targeted plan beside the next group's generation)`,
      );
      console.log(
        `  main path, in seconds from its start: ${timeline.spans
          .map((x) => `${x.type} ${(x.startMs / 1000).toFixed(1)}–${(x.endMs / 1000).toFixed(1)}`)
          .join(', ')}`,
      );
      console.log(
        `  engine calls, in seconds from its start: ${calls
          .map((c, i) => {
            const end = ends[i] ?? 0;
            return `${c.args[0]} ${((end - c.durationMs) / 1000).toFixed(1)}–${(end / 1000).toFixed(1)}`;
          })
          .join(', ')}`,
      );
      const wholeRoot = calls.filter(
        (c) => c.args[0] === 'plan' && !c.args.some((a) => a.startsWith('-target=')),
      );
      const wholeRootS = wholeRoot.map((c) => c.durationMs / 1000);
      return { input, result, wall, ratio: (wall * 1000) / engineMs, wholeRootS };
    };

    // Rounds and yardstick plans alternate: each round's yardstick is the mean of the plans just
    // before and after it (the machine's speed drifts over the minutes a run takes).
    const rounds: (Awaited<ReturnType<typeof runRound>> & { yardstick: number; vs: number })[] = [];
    let before = defaults;
    for (let n = 1; n <= ROUNDS; n++) {
      const r = await runRound(n);
      const after = n === ROUNDS ? [await timedPlan(), await timedPlan()] : [await timedPlan()];
      const yardstick = mean([...before, ...after]);
      rounds.push({ ...r, yardstick, vs: r.wall / yardstick });
      console.log(
        `  its whole-root plans: ${r.wholeRootS.map((x) => x.toFixed(1)).join(', ')} s; one plan of the root before and after it, alone: ${[...before, ...after].map((x) => x.toFixed(1)).join(', ')} s`,
      );
      console.log(
        `  round ${n} over one whole-root plan (${yardstick.toFixed(1)} s): ${(r.wall / yardstick).toFixed(2)}×`,
      );
      before = after.slice(-1);
    }
    clearInterval(sampler);
    await worker.stop();
    // Derivation on the first round's own first plan.
    const planJson = join(work, 'plan.json');
    await worker.artifacts.download(
      roundArtifactKey(rounds[0]?.input.session_id ?? '', 'r1', 'iteration-1/plan.json'),
      planJson,
    );
    const times: number[] = [];
    let drifted = 0;
    for (let r = 0; r < 5; r++) {
      const d0 = performance.now();
      drifted = deriveDrift(await readPlanForDrift(planJson)).length;
      times.push(performance.now() - d0);
    }
    times.sort((a, b) => a - b);
    if (MODEL_MS > 0) console.log(`each remediation answered ${MODEL_MS} ms later than the offline model's`);
    console.log(
      `drift derivation on the round's plan (${drifted} drifted of 1000): median ${times[2]?.toFixed(0)} ms of 5`,
    );
    console.log(
      `peak RSS of the process running the worker: ${(peak / 1048576).toFixed(0)} MiB (${((peak - base) / 1048576).toFixed(0)} MiB above its start)`,
    );
    // The median round (by its ratio to the yardstick) gives the figures.
    const median = [...rounds].sort((a, b) => a.vs - b.vs)[Math.floor(rounds.length / 2)];
    if (!median) throw new Error('no round ran');
    const remediated = Math.min(...rounds.map((r) => r.result.remediated.length));
    console.log(
      `overhead ratio (round wall time over its engine processes), the median round's: ${median.ratio.toFixed(3)} (each: ${rounds.map((r) => r.ratio.toFixed(3)).join(', ')})`,
    );
    console.log(
      `the round over one whole-root plan, median of ${rounds.length}: ${median.vs.toFixed(2)}× (each: ${rounds.map((r) => `${r.vs.toFixed(2)}×`).join(', ')}; target ≤ 2.5×)`,
    );
    console.log(
      `BENCH_REAL_ROOT ${JSON.stringify({ round_overhead_ratio_1000: Number(median.ratio.toFixed(3)), round_wall_s_1000: Number(median.wall.toFixed(1)), remediated_1000: remediated, worker_peak_rss_mib_1000: Math.round(peak / 1048576), one_plan_s_1000: Number(median.yardstick.toFixed(1)), one_plan_before_s_1000: Number(onePlanS.toFixed(1)), one_plan_wide_s_1000: Number(widePlanS.toFixed(1)), round_1000_vs_one_plan: Number(median.vs.toFixed(2)), round_1000_vs_one_plan_each: rounds.map((r) => Number(r.vs.toFixed(2))), one_plan_range_s_1000: [Number(Math.min(...plans).toFixed(1)), Number(Math.max(...plans).toFixed(1))] })}`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
    await stop();
  }
}

await main();
