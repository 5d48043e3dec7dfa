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
  let h: TemporalHarness;
  const runs = new Map<string, RootRun>();
  const checkouts: string[] = [];

  beforeAll(async () => {
    h = await temporalHarness('real-roots', testActivities());
    const s = stack();
    const git = gitClient();
    const engine = engineDeps('terraform', s.awsEndpoint);
    const beds = await Promise.all(
      REAL_ROOTS.map((spec) => createAwsTestBed({ spec, gitHostUrl: s.gitHostUrl, git, engine })),
    );
    const aws = awsClients(s.awsEndpoint);
    for (const b of beds) await b.injectAll(aws);
    await Promise.all(
      beds.map(async (bed) => {
        const input = roundInput(bed.repoUrl, {
          mode: 'full',
          iac_path: bed.iacPath,
          text: 'Reconcile the code with what is really deployed.',
        });
        const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
          taskQueue: h.taskQueue,
          workflowId: driftRoundWorkflowId(input.session_id, input.round_id),
          args: [input],
        });
        const report = driftReportSchema.parse(
          JSON.parse(await artifactStore().getText(result.report_key as string)),
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
        const dir = mkdtempSync(join(tmpdir(), 'kumoss-verify-'));
        checkouts.push(dir);
        await git.checkout({ url: bed.repoUrl, dir, branch: result.branch });
        const diff = await git.run(['diff', '--no-color', 'origin/main..HEAD'], dir);
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

  it('the seed example: the diff for sg-web-demo adds the port 8080 block and removes nothing', () => {
    const run = runs.get('network') as RootRun;
    const main = run.diff.split(/^diff --git /m).find((d) => d.startsWith('a/envs/network/main.tf')) ?? '';
    const removed = main.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---'));
    const added = main.split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++'));
    expect(removed).toEqual([]);
    expect(added.join('\n')).toContain('from_port   = 8080');
    expect(added.join('\n')).toContain('cidr_blocks = ["0.0.0.0/0"]');
  });
});
