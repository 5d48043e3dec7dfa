// Drift rounds on real-world roots (the corpus): four roots shaped like a platform team's —
// security groups with ingress blocks, tags, buckets, versioning, IAM roles, instances with count
// and for_each, variables, tfvars, locals, local modules — applied with kumoss/aws into moto and
// drifted through the AWS APIs, one case per drift. Each root gets one real full round; then a
// fresh plan of the pushed branch checks every case: what the report calls remediated has no drift
// left, what it calls unreconciled is exactly what still drifts, and the diff is in canonical form.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { blockAddress } from '../../activities/hcl-edit';
import type { DriftRoundResult } from '../../shared/contracts';
import { driftReportSchema, type DriftReport } from '../../shared/drift-report';
import { driftRoundWorkflowId } from '../../shared/ids';
import { detectDrift, driftRound } from '../../workflows';
import {
  awsClients,
  createAwsTestBed,
  DEMO_ROOT,
  REAL_ROOTS,
  type AwsTestBed,
  type DriftCase,
} from '../support/aws-test-bed';
import {
  artifactStore,
  engineDeps,
  gitClient,
  roundInput,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';
import { needsBackgroundBuilds } from '../support/background-builds';

interface SeedRun {
  result: DriftRoundResult;
  report: DriftReport;
  diff: string;
}

interface RootRun {
  bed: AwsTestBed;
  result: DriftRoundResult;
  report: DriftReport;
  /** Drifted addresses in a fresh plan of the pushed branch. */
  after: string[];
  /** The branch's diff against main, and the files it changes (repository paths). */
  diff: string;
  changedFiles: string[];
  /** Files of the branch that `terraform fmt` would change. */
  unformatted: string[];
}

describe('drift rounds on real-world roots (kumoss/aws on moto)', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  const runs = new Map<string, RootRun>();
  let seed!: SeedRun;
  let tofuSeed!: SeedRun;
  let beds: AwsTestBed[] = [];
  const checkouts: string[] = [];

  beforeAll(async () => {
    h = await temporalHarness('real-roots', testActivities());
    const s = stack();
    const git = gitClient();
    const engine = engineDeps('terraform', s.awsEndpoint);
    const tofu = engineDeps('tofu', s.awsEndpoint);
    const [tofuBed, ...rootBeds] = await Promise.all([
      // The seed's example once more, applied and reconciled with OpenTofu (registry.opentofu.org).
      createAwsTestBed({ spec: DEMO_ROOT, gitHostUrl: s.gitHostUrl, git, engine: tofu }),
      ...REAL_ROOTS.map((spec) => createAwsTestBed({ spec, gitHostUrl: s.gitHostUrl, git, engine })),
    ]);
    beds = rootBeds;
    const aws = awsClients(s.awsEndpoint);
    for (const b of beds) await b.injectAll(aws);
    await tofuBed.injectAll(aws);
    const network = beds.find((b) => b.spec.name === 'network') as AwsTestBed;
    /** A round on a bed, its report, and a checkout of the branch it pushed with its diff. */
    const run = async (
      bed: AwsTestBed,
      mode: 'full' | 'partial',
      text: string,
      kind: 'terraform' | 'tofu' = 'terraform',
    ) => {
      const input = roundInput(bed.repoUrl, { mode, iac_path: bed.iacPath, text, engine: kind });
      const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
        taskQueue: h.taskQueue,
        workflowId: driftRoundWorkflowId(input.session_id, input.round_id),
        args: [input],
      });
      const report = driftReportSchema.parse(
        JSON.parse(await artifactStore().getText(result.report_key as string)),
      );
      const dir = mkdtempSync(join(tmpdir(), 'kumoss-verify-'));
      checkouts.push(dir);
      await git.checkout({ url: bed.repoUrl, dir, branch: result.branch });
      const diff = await git.run(['diff', '--no-color', 'origin/main..HEAD'], dir);
      return { result, report, dir, diff };
    };
    // The seed's own example, as a partial round on its own session.
    const SEED = 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.';
    const seedRound = run(network, 'partial', SEED);
    const tofuRound = run(tofuBed, 'partial', SEED, 'tofu');
    await Promise.all(
      beds.map(async (bed) => {
        const { result, report, dir, diff } = await run(
          bed,
          'full',
          'Reconcile the code with what is really deployed.',
        );
        const fresh = await h.client.workflow.execute(detectDrift, {
          taskQueue: h.taskQueue,
          workflowId: `verify-${randomUUID()}`,
          args: [
            {
              repositoryUrl: bed.repoUrl,
              branch: result.branch,
              iacPath: bed.iacPath,
              scopeId: 'scope-test',
            },
          ],
        });
        const changedFiles = (await git.run(['diff', '--name-only', 'origin/main..HEAD'], dir))
          .split('\n')
          .filter(Boolean);
        const fmt = new EngineClient({ ...engine, workdir: dir, scopeId: 'scope-test' });
        const unformatted: string[] = [];
        for (const f of changedFiles) {
          const text = readFileSync(join(dir, f), 'utf8');
          if ((await fmt.fmt(text)) !== text) unformatted.push(f);
        }
        runs.set(bed.spec.name, {
          bed,
          result,
          report,
          after: fresh.drifted,
          diff,
          changedFiles,
          unformatted,
        });
      }),
    );
    seed = await seedRound;
    tofuSeed = await tofuRound;
  }, 600_000);

  afterAll(async () => {
    for (const d of checkouts) rmSync(d, { recursive: true, force: true });
    await Promise.all([...runs.values()].map((r) => r.bed.destroy()));
    await h?.close();
  });

  const cases = REAL_ROOTS.flatMap((spec) => spec.cases.map((c) => ({ root: spec.name, ...c })));

  it('the corpus holds at least 30 drift cases over the shapes of real roots', () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
    expect(new Set(cases.map((c) => c.id)).size).toBe(cases.length);
  });

  it.each(cases.map((c) => [c.id, c] as [string, DriftCase & { root: string }]))('%s', (_id, c) => {
    const run = runs.get(c.root) as RootRun;
    const remediated = run.report.remediated_resources.map((r) => r.address);
    const unreconciled = run.report.unreconciled_drift ?? [];
    if (c.expect === 'fixed') {
      // Named remediated only from the diff, and no drift left on that instance.
      expect(remediated).toContain(blockAddress(c.address));
      expect(run.after).not.toContain(c.address);
      expect(unreconciled.map((u) => u.address)).not.toContain(c.address);
      if (c.files) {
        const files =
          run.report.remediated_resources.find((r) => r.address === blockAddress(c.address))?.files ?? [];
        expect(files.map((f) => f.replace(`${run.bed.iacPath}/`, ''))).toEqual(
          expect.arrayContaining(c.files),
        );
      }
    } else {
      const entry = unreconciled.find((u) => u.address === c.address);
      expect(entry, `${c.address} among ${JSON.stringify(unreconciled)}`).toBeDefined();
      expect(entry?.reason).toMatch(c.reason as RegExp);
      expect(run.after).toContain(c.address);
    }
  });

  it.each(REAL_ROOTS.map((r) => r.name))(
    'root %s: the report names exactly what the branch fixed and exactly what still drifts, in canonical form',
    (name) => {
      const run = runs.get(name) as RootRun;
      const spec = run.bed.spec;
      const fixedBlocks = [
        ...new Set(spec.cases.filter((c) => c.expect === 'fixed').map((c) => blockAddress(c.address))),
      ];
      expect(run.report.remediated_resources.map((r) => r.address).sort()).toEqual(fixedBlocks.sort());
      const left = spec.cases.filter((c) => c.expect === 'left').map((c) => c.address);
      expect((run.report.unreconciled_drift ?? []).map((u) => u.address).sort()).toEqual([...left].sort());
      expect([...run.after].sort()).toEqual([...left].sort());
      expect(run.result.outcome).toBe(left.length > 0 ? 'Partial' : 'Succeeded');
      expect(run.unformatted).toEqual([]);
    },
  );

  it('the seed example: a partial round targets sg-web-demo by its Name tag, fixes exactly it, and the diff only adds the 8080 rule', () => {
    expect(seed.result.targets).toEqual(['aws_security_group.web']);
    expect(seed.report.remediated_resources.map((r) => r.address)).toEqual(['aws_security_group.web']);
    expect(seed.report).not.toHaveProperty('unreconciled_drift');
    expect(seed.result.outcome).toBe('Succeeded');
    const lines = seed.diff.split('\n');
    expect(lines.filter((l) => l.startsWith('-') && !l.startsWith('---'))).toEqual([]);
    expect(lines.filter((l) => l.startsWith('+') && !l.startsWith('+++'))).toEqual([
      '+  ingress {',
      '+    from_port   = 8080',
      '+    to_port     = 8080',
      '+    protocol    = "tcp"',
      '+    cidr_blocks = ["0.0.0.0/0"]',
      '+  }',
      '+',
    ]);
  });

  it('the seed example reconciles the same way under OpenTofu', () => {
    expect(tofuSeed.result.targets).toEqual(['aws_security_group.web']);
    expect(tofuSeed.report.remediated_resources.map((r) => r.address)).toEqual(['aws_security_group.web']);
    expect(tofuSeed.result.outcome).toBe('Succeeded');
    expect(tofuSeed.diff.split('\n').filter((l) => /^[+-](?![+-])/.test(l))).toEqual(
      seed.diff.split('\n').filter((l) => /^[+-](?![+-])/.test(l)),
    );
  });

  it('targets what people name: a cloud id, a Name tag, an address, an instance id, a module path', async () => {
    const acts = testActivities();
    const bed = (name: string) => beds.find((b) => b.spec.name === name) as AwsTestBed;
    const targets = async (b: AwsTestBed, text: string) =>
      (
        await acts.selectTargets({
          ref: {
            sessionId: `s-${randomUUID().slice(0, 8)}`,
            roundId: 'r1',
            repositoryUrl: b.repoUrl,
            iacPath: b.iacPath,
            scopeId: 'scope-test',
            cloud: 'aws',
            branch: 'main',
          },
          text,
        })
      ).targets;
    const net = bed('network');
    expect(
      await targets(net, `Resolve the drift on ${net.ids.get('aws_security_group.db')} please.`),
    ).toEqual(['aws_security_group.db']);
    expect(await targets(net, 'Someone changed sg-web-demo by hand; reconcile it.')).toEqual([
      'aws_security_group.web',
    ]);
    expect(await targets(net, 'Reconcile aws_security_group.cache.')).toEqual(['aws_security_group.cache']);
    const compute = bed('compute');
    expect(
      await targets(compute, `Drift on instance ${compute.ids.get('aws_instance.worker[1]')}; resolve it.`),
    ).toEqual(['aws_instance.worker[1]']);
    expect(await targets(bed('modules'), 'Resolve the drift in module.edge; fix this.')).toEqual([
      'module.edge',
    ]);
  });
});
