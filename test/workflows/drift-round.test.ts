// Drift rounds end to end on the real stack: Temporal dev server, terraform, providers, git host,
// object store; the offline model provider.
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DriftRoundInput, DriftRoundResult } from '../../shared/contracts';
import { driftReportSchema } from '../../shared/drift-report';
import { driftRoundWorkflowId, roundArtifactKey } from '../../shared/ids';
import { detectDrift, driftRound } from '../../workflows';
import { OfflineModel } from '../../activities/model/offline';
import { DRIFT_ADDRESSES, TIME_PROVIDER, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  gitClient,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  newTestBed,
  promptsWithAwsRules,
  REPLICAS_RULE,
  roundInput,
} from '../support/stack';

/** An output naming a variable nobody declared: every plan of the root meets it. */
const BROKEN_OUTPUT = 'output "broken" {\n  value = var.undeclared\n}\n';
/**
 * A data source reading a file that is not there: `validate` and a plan targeted elsewhere never
 * read it, a plan of the whole root does.
 */
const MISSING_FILE_DATA = 'data "local_file" "gone" {\n  filename = "${path.module}/gone.txt"\n}\n';

/** A worker answering with `model` and a drift test bed of its own, for the describe block that calls it. */
function harnessWithBed(name: string, model: OfflineModel): { h: TemporalHarness; b: DriftTestBed } {
  const bed = {} as { h: TemporalHarness; b: DriftTestBed };
  beforeAll(async () => {
    bed.h = await temporalHarness(name, testActivities({ model }));
    bed.b = await newTestBed();
  });
  afterAll(async () => {
    await bed.b?.destroy();
    await bed.h?.close();
  });
  return bed;
}

describe('driftRound on the drift test bed', () => {
  let h: TemporalHarness;
  const beds: DriftTestBed[] = [];

  beforeAll(async () => {
    h = await temporalHarness('drift-round', testActivities());
  });
  afterAll(async () => {
    await Promise.all(beds.map((b) => b.destroy()));
    await h?.close();
  });

  async function bed(): Promise<DriftTestBed> {
    const b = await newTestBed();
    beds.push(b);
    return b;
  }

  async function round(
    b: DriftTestBed,
    input: Partial<DriftRoundInput> & Pick<DriftRoundInput, 'mode' | 'text'>,
  ) {
    const args = roundInput(b.repoUrl, input);
    const session = args.session_id;
    const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId: driftRoundWorkflowId(session, args.round_id),
      args: [args],
    });
    const report = result.report_key
      ? driftReportSchema.parse(JSON.parse(await artifactStore().getText(result.report_key)))
      : undefined;
    return { session, result, report };
  }

  async function detectOnBranch(b: DriftTestBed, branch: string) {
    return h.client.workflow.execute(detectDrift, {
      taskQueue: h.taskQueue,
      workflowId: `verify-${randomUUID()}`,
      args: [{ repositoryUrl: b.repoUrl, branch, scopeId: 'scope-test' }],
    });
  }

  it('full round fixes two drifted resources, reports Succeeded, and the pushed branch plans clean', async () => {
    const b = await bed();
    await b.inject('attribute');
    await b.inject('ingress');
    const { session, result, report } = await round(b, {
      mode: 'full',
      text: 'Reconcile everything in the root.',
    });
    expect(result.status).toBe('completed');
    expect(result.outcome).toBe('Succeeded');
    expect(report?.remediated_resources.map((r) => r.address)).toEqual([
      DRIFT_ADDRESSES.attribute,
      DRIFT_ADDRESSES.ingress,
    ]);
    expect(report).not.toHaveProperty('unreconciled_drift');
    expect(report).not.toHaveProperty('whitelisted_exceptions');
    const fresh = await detectOnBranch(b, result.branch);
    expect(fresh.drifted).toEqual([]);
    expect(fresh.hasChanges).toBe(false);
    // Iteration 2 read the plan that validated the change: it changes nothing (exit code 0), so the
    // iteration is in sync without `show -json` — the first iteration's plan JSON is the only one.
    expect(result.iterations).toBe(2);
    const listed = await artifactStore().list(roundArtifactKey(session, result.round_id, ''));
    expect(listed.filter((k) => k.endsWith('/plan.json')).map((k) => k.split('/').at(-2))).toEqual([
      'iteration-1',
    ]);
    expect(
      await artifactStore().getText(roundArtifactKey(session, result.round_id, 'iteration-2/plan.txt')),
    ).toBe('No drift: the plan validated by the last cycle is in sync.\n');
  });

  it('partial round fixes only the named resource and leaves other drift alone', async () => {
    const b = await bed();
    await b.inject('attribute');
    await b.inject('ingress');
    const { result, report } = await round(b, {
      mode: 'partial',
      text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
    });
    expect(result.targets).toEqual([DRIFT_ADDRESSES.ingress]);
    expect(result.status).toBe('completed');
    expect(result.outcome).toBe('Succeeded');
    expect(report?.remediated_resources.map((r) => r.address)).toEqual([DRIFT_ADDRESSES.ingress]);
    // app_config was not targeted: its drift is still there on the branch.
    const fresh = await detectOnBranch(b, result.branch);
    expect(fresh.drifted).toEqual([DRIFT_ADDRESSES.attribute]);
  });

  it('reports drift it cannot fix as unreconciled and the outcome as Partial', async () => {
    const b = await bed();
    await b.inject('ingress');
    await b.inject('file');
    const { result, report } = await round(b, { mode: 'full', text: 'Reconcile everything in the root.' });
    expect(result.outcome).toBe('Partial');
    expect(report?.remediated_resources.map((r) => r.address)).toEqual([DRIFT_ADDRESSES.ingress]);
    expect(report?.unreconciled_drift).toEqual([
      expect.objectContaining({
        address: DRIFT_ADDRESSES.file,
        reason: expect.stringContaining('no longer exists') as string,
      }),
    ]);
    expect(report).not.toHaveProperty('whitelisted_exceptions');
  });

  it('declines a request to create infrastructure as an operation mismatch, changing nothing', async () => {
    const b = await bed();
    await b.inject('ingress');
    const { result, report } = await round(b, {
      mode: 'partial',
      text: 'Create a new S3 bucket for the logs.',
    });
    expect(result.status).toBe('uncompleted');
    expect(result.reason).toMatch(/^Operation mismatch/);
    expect(report).toBeUndefined();
    const branches = await gitClient().remoteBranches(b.repoUrl);
    expect([...branches.keys()]).toEqual(['main']);
  });

  it('ends uncompleted without a commit when the root is already in sync', async () => {
    const b = await bed();
    const { result, report } = await round(b, { mode: 'full', text: 'Reconcile everything.' });
    expect(result.status).toBe('uncompleted');
    expect(result.iterations).toBe(1);
    expect(result.stopped_because).toBe('in-sync');
    expect(report?.outcome).toBe('Succeeded');
    expect(report?.remediated_resources).toEqual([]);
  });
});

describe('driftRound with drift-exception rules', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;
  let b2: DriftTestBed;

  beforeAll(async () => {
    const dir = promptsWithAwsRules([
      ...REPLICAS_RULE,
      '  - id: expired-rule',
      '    resource_type: rest_object',
      '    attribute: data.ingress',
      '    reason: An old waiver.',
      '    expires: "2020-01-01"',
    ]);
    h = await temporalHarness('drift-round-exceptions', testActivities({ promptsDir: dir }));
    b = await newTestBed();
    b2 = await newTestBed();
  });
  afterAll(async () => {
    await Promise.all([b?.destroy(), b2?.destroy()]);
    await h?.close();
  });

  const run = (bed: DriftTestBed, text: string) =>
    h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId: `exc-${randomUUID()}`,
      args: [roundInput(bed.repoUrl, { text })],
    });

  it('leaves excepted drift untouched, lists it with its rule, and still reports Succeeded', async () => {
    await b.inject('attribute');
    await b.inject('ingress');
    const result = await run(b, 'Reconcile everything.');
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.outcome).toBe('Succeeded');
    expect(report.remediated_resources.map((r) => r.address)).toEqual([DRIFT_ADDRESSES.ingress]);
    expect(report.whitelisted_exceptions).toEqual([
      {
        address: DRIFT_ADDRESSES.attribute,
        attributes: ['data.replicas'],
        rule_id: 'replicas-tuned-by-oncall',
        reason: 'The on-call team tunes replica counts by hand.',
      },
    ]);
    expect(report).not.toHaveProperty('unreconciled_drift');
    // The excepted object's code was not touched: replicas is still the declared 2 on the branch.
    const text = await gitClient().run(['show', `origin/${result.branch}:main.tf`], await cloneOf(b.repoUrl));
    expect(text).toContain(`"replicas": 2`);
    expect(text).toMatch(/to_port\s*=\s*8080/);
  });

  it('stops the loop after iteration 1 when every operation is excluded', async () => {
    await b2.inject('attribute');
    const result = await run(b2, 'Reconcile everything.');
    expect(result.iterations).toBe(1);
    expect(result.stopped_because).toBe('all-excluded');
    expect(result.status).toBe('uncompleted');
    expect(result.outcome).toBe('Succeeded');
    expect(result.whitelisted_count).toBe(1);
  });
});

describe('driftRound when a remediation adds a provider', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;

  // The offline provider's fix, plus a new provider requirement and a resource of it: the engine
  // then asks for init, and the round must init again by itself.
  class AddsProviderModel extends OfflineModel {
    override async remediate(input: Parameters<OfflineModel['remediate']>[0]) {
      const r = await super.remediate(input);
      return {
        ...r,
        edits: r.edits.map((e) =>
          e.path === 'main.tf'
            ? {
                ...e,
                content: e.content
                  .replace('  required_providers {\n', `  required_providers {\n${TIME_PROVIDER}`)
                  .concat('\nresource "time_static" "remediated_at" {}\n'),
              }
            : e,
        ),
      };
    }
  }

  beforeAll(async () => {
    h = await temporalHarness('drift-round-reinit', testActivities({ model: new AddsProviderModel() }));
    b = await newTestBed({ withTime: false });
  });
  afterAll(async () => {
    await b?.destroy();
    await h?.close();
  });

  it('re-runs init when the engine asks for it and completes the round', async () => {
    await b.inject('ingress');
    const result = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId: `reinit-${randomUUID()}`,
      args: [roundInput(b.repoUrl)],
    });
    expect(result.engine_reinits).toBeGreaterThanOrEqual(1);
    expect(result.outcome).toBe('Succeeded');
    expect(result.remediated).toContain(DRIFT_ADDRESSES.ingress);
  });
});

describe('driftRound when the whole root disagrees with a group’s targeted plan', () => {
  // The offline fix, plus — beside app_config's fix — a data source reading a file that is not
  // there: `validate` and a plan targeted at app_config never read it, a plan of the whole root does.
  const model = besideFix(DRIFT_ADDRESSES.attribute, MISSING_FILE_DATA);

  const bed = harnessWithBed('drift-round-confirm', model);

  it('says so, validates each group against the whole root, and keeps only the change that plans', async () => {
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    expect(result.outcome).toBe('Partial');
    expect(result.remediated).toEqual([DRIFT_ADDRESSES.ingress]);
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    const record = JSON.parse(await artifactStore().getText(`${prefix}/confirm/confirm.json`)) as {
      disagreement: string;
      reverted: number[];
      planKey: string;
    };
    expect(record.disagreement).toMatch(/gone\.txt/);
    expect(record.reverted).toEqual([0]);
    expect(record.planKey).toBe(`${prefix}/confirm/group-1.tfplan`);
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.unreconciled_drift).toEqual([
      expect.objectContaining({
        address: DRIFT_ADDRESSES.attribute,
        reason: expect.stringContaining('planned on its own but not with the whole root') as string,
      }),
    ]);
    // The branch says what happened, and plans with only the ingress fix on it.
    const clone = await cloneOf(bed.b.repoUrl);
    await gitClient().run(['checkout', '--quiet', result.branch], clone);
    const log = await gitClient().run(['log', '--format=%s'], clone);
    expect(log).toContain("Take back iteration 1's changes to validate each against the whole root");
    const fresh = await bed.h.client.workflow.execute(detectDrift, {
      taskQueue: bed.h.taskQueue,
      workflowId: `verify-${randomUUID()}`,
      args: [{ repositoryUrl: bed.b.repoUrl, branch: result.branch, scopeId: 'scope-test' }],
    });
    expect(fresh.drifted).toEqual([DRIFT_ADDRESSES.attribute]);
  });
});

describe('driftRound when the whole root still disagrees once a change that does not plan is taken back', () => {
  // Beside app_config's fix, at the end of main.tf, an output naming a variable nobody declared
  // (every plan meets it); beside the ingress fix, at its start, a data source reading a file that
  // is not there (a plan targeted at the ingress group never reads it, the whole root's does). The
  // two additions are apart: both changes are proposed and committed in one step.
  const model = besideFix(
    DRIFT_ADDRESSES.attribute,
    BROKEN_OUTPUT,
    besideFix(DRIFT_ADDRESSES.ingress, MISSING_FILE_DATA, new OfflineModel(), 'start'),
  );

  const bed = harnessWithBed('drift-round-still-disagrees', model);

  it('takes that change back, then validates the rest against the whole root and takes back what does not plan', async () => {
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    expect(result.remediated).toEqual([]);
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    // The whole root refused with the broken output; the attribute change failed its own plan and
    // was taken back; the whole root then refused for the missing file: the disagreement, after
    // which the ingress change, alone on the root without the changes, did not plan either.
    const record = JSON.parse(await artifactStore().getText(`${prefix}/confirm/confirm.json`)) as {
      disagreement: string;
      reverted: number[];
      planKey?: string;
    };
    expect(record.disagreement).toMatch(/gone\.txt/);
    expect(record.reverted).toEqual([0, 1]);
    expect(record.planKey).toBeUndefined();
    // Of the whole root's plans, only the one without the changes planned (a plan's output is
    // stored when it plans).
    const confirmPlans = (await artifactStore().list(`${prefix}/confirm/`))
      .filter((k) => k.endsWith('.txt'))
      .map((k) => k.split('/').at(-1));
    expect(confirmPlans).toEqual(['base.txt']);
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.unreconciled_drift).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          address: DRIFT_ADDRESSES.attribute,
          reason: expect.stringMatching(
            /^The proposed change did not validate \(.*Reference to undeclared input variable.*\); it was reverted\.$/,
          ) as string,
        }),
        expect.objectContaining({
          address: DRIFT_ADDRESSES.ingress,
          reason: expect.stringMatching(
            /^The proposed change planned on its own but not with the whole root \(.*gone\.txt.*\); it was reverted\.$/s,
          ) as string,
        }),
      ]),
    );
    // The branch says each step, and its tree is the base's again.
    const clone = await cloneOf(bed.b.repoUrl);
    await gitClient().run(['checkout', '--quiet', result.branch], clone);
    const log = (await gitClient().run(['log', '--format=%s', '-4'], clone)).trim().split('\n');
    expect(log[0]).toBe("Take back iteration 1's changes to validate each against the whole root");
    expect(log[1]).toBe("Take back iteration 1's changes that do not plan on their own");
    expect(log[2]).toMatch(/^Reconcile drift: /);
    expect(log[3]).toMatch(/^Reconcile drift: /);
    expect((await gitClient().run(['diff', '--stat', 'origin/main', 'HEAD'], clone)).trim()).toBe('');
  });
});

describe('driftRound when a group’s change does not validate', () => {
  // The offline fix, plus — beside app_config's fix — an output naming a variable nobody declared:
  // an error outside the addresses the group's plan targets, which the plan finds all the same
  // (no `validate` process runs beside it). `failNext`: the next request for the ingress group's
  // change fails (a model's overloaded answer), as a request for the iteration's proposals may.
  const fix = besideFix(DRIFT_ADDRESSES.attribute, BROKEN_OUTPUT);
  const failNext = { ingress: false };
  const model = new (class extends OfflineModel {
    override async remediate(input: Parameters<OfflineModel['remediate']>[0]) {
      if (failNext.ingress && input.operations.some((o) => o.address === DRIFT_ADDRESSES.ingress)) {
        failNext.ingress = false;
        throw new Error('overloaded');
      }
      return fix.remediate(input);
    }
  })();

  const bed = harnessWithBed('drift-round-invalid', model);

  /** The round's report, with the attribute's change taken back for the engine's diagnostic. */
  const takenBackReport = async (result: DriftRoundResult) => {
    expect(result.outcome).toBe('Partial');
    expect(result.remediated).toEqual([DRIFT_ADDRESSES.ingress]);
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.unreconciled_drift).toEqual([
      expect.objectContaining({
        address: DRIFT_ADDRESSES.attribute,
        reason: expect.stringMatching(
          /^The proposed change did not validate \(.*Reference to undeclared input variable \(main\.tf line \d+\)\); it was reverted\.$/,
        ) as string,
      }),
    ]);
    const clone = await cloneOf(bed.b.repoUrl);
    await gitClient().run(['checkout', '--quiet', result.branch], clone);
    return (await gitClient().run(['log', '--format=%s', '-3'], clone)).trim().split('\n');
  };

  it('plans the next change apart from it, takes it back alone and keeps the one that plans', async () => {
    // Both changes proposed at once and committed in turn: no targeted plan ran beside them, and
    // the whole root's plan is the first to meet the broken output.
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    const log = await takenBackReport(result);
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    // The ingress change planned without the broken one (reverted in its checkout), so it stays.
    expect(JSON.parse(await artifactStore().getText(`${prefix}/confirm/confirm.json`))).toEqual({
      reverted: [0],
      planKey: `${prefix}/confirm/plan-after-take-back.tfplan`,
      planClean: false,
    });
    expect(log[0]).toBe("Take back iteration 1's changes that do not plan on their own");
    expect(log[1]).toMatch(/^Reconcile drift: /);
    expect(log[2]).toMatch(/^Reconcile drift: /);
  });

  it('takes the change back after the cycles when its targeted plan ran beside the next group’s', async () => {
    // No proposal for the ingress group: its cycle asks the model itself, and the first group's
    // targeted plan runs meanwhile.
    failNext.ingress = true;
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    const log = await takenBackReport(result);
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    expect(JSON.parse(await artifactStore().getText(`${prefix}/take-back.json`))).toEqual({ takenBack: [0] });
    expect(log[0]).toBe("Take back iteration 1's changes that did not validate (group 1)");
    expect(log[1]).toMatch(/^Reconcile drift: /);
  });
});

describe('driftRound when the last group’s change does not plan', () => {
  // The offline fix, plus — beside the last group's (ingress) fix — an output naming a variable
  // nobody declared: no targeted plan ran for the last group, so the whole root's plan is the first
  // to meet it.
  const model = besideFix(DRIFT_ADDRESSES.ingress, BROKEN_OUTPUT);

  const bed = harnessWithBed('drift-round-last', model);

  it('plans that change on its own, takes it back alone, and plans the whole root once more', async () => {
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    expect(result.outcome).toBe('Partial');
    expect(result.remediated).toEqual([DRIFT_ADDRESSES.attribute]);
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    const record = JSON.parse(await artifactStore().getText(`${prefix}/confirm/confirm.json`)) as Record<
      string,
      unknown
    >;
    // Not a disagreement: the change failed its own plan too, and nothing else was planned again.
    expect(record).toEqual({
      reverted: [1],
      planKey: `${prefix}/confirm/plan-after-take-back.tfplan`,
      // The ingress drift the change would have fixed is still there.
      planClean: false,
    });
    // The whole root planned once more and that was all: no plan of the root without the changes
    // (`base`), none per group (`group-<n>`).
    const confirmPlans = (await artifactStore().list(`${prefix}/confirm/`)).filter((k) => k.endsWith('.txt'));
    expect(confirmPlans.map((k) => k.split('/').at(-1))).toEqual(['plan-after-take-back.txt']);
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.unreconciled_drift).toEqual([
      expect.objectContaining({
        address: DRIFT_ADDRESSES.ingress,
        reason: expect.stringMatching(
          /^The proposed change did not validate \(.*Reference to undeclared input variable.*\); it was reverted\.$/,
        ) as string,
      }),
    ]);
    const clone = await cloneOf(bed.b.repoUrl);
    await gitClient().run(['checkout', '--quiet', result.branch], clone);
    const log = (await gitClient().run(['log', '--format=%s', '-2'], clone)).trim().split('\n');
    expect(log[0]).toBe("Take back iteration 1's changes that do not plan on their own");
    expect(log[1]).toMatch(/^Reconcile drift: /);
    const fresh = await bed.h.client.workflow.execute(detectDrift, {
      taskQueue: bed.h.taskQueue,
      workflowId: `verify-${randomUUID()}`,
      args: [{ repositoryUrl: bed.b.repoUrl, branch: result.branch, scopeId: 'scope-test' }],
    });
    expect(fresh.drifted).toEqual([DRIFT_ADDRESSES.ingress]);
  });
});

describe('driftRound when a later group edited the lines an invalid change added', () => {
  // The first group's fix adds a broken output at the end of main.tf; the second group, generated
  // on top of it while the first group's plan ran, adds a valid output right after it: the first
  // change no longer reverts apart from the second's.
  const model = besideFix(
    DRIFT_ADDRESSES.attribute,
    BROKEN_OUTPUT,
    besideFix(DRIFT_ADDRESSES.ingress, 'output "fine" {\n  value = "ok"\n}\n'),
  );

  const bed = harnessWithBed('drift-round-take-back', model);

  it('takes both changes back, each with its reason, and leaves the branch as it began', async () => {
    const { args, result } = await twoGroupRound(bed.h, bed.b);
    expect(result.remediated).toEqual([]);
    expect(result.stopped_because).toBe('no-progress');
    const prefix = `sessions/${args.session_id}/rounds/${args.round_id}/iteration-1`;
    expect(JSON.parse(await artifactStore().getText(`${prefix}/take-back.json`))).toEqual({
      takenBack: [0, 1],
    });
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.unreconciled_drift).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          address: DRIFT_ADDRESSES.attribute,
          reason: expect.stringMatching(/^The proposed change did not validate \(/) as string,
        }),
        expect.objectContaining({
          address: DRIFT_ADDRESSES.ingress,
          reason:
            'The proposed change was taken back: it did not revert apart from an earlier change that did not validate.',
        }),
      ]),
    );
    // The branch's tree is the base's again: both changes taken back in one commit.
    const clone = await cloneOf(bed.b.repoUrl);
    await gitClient().run(['checkout', '--quiet', result.branch], clone);
    const diff = await gitClient().run(['diff', '--stat', 'origin/main', 'HEAD'], clone);
    expect(diff.trim()).toBe('');
    const log = await gitClient().run(['log', '--format=%s', '-1'], clone);
    expect(log.trim()).toBe("Take back iteration 1's changes that did not validate (groups 1, 2)");
  });
});

/** The bed's attribute and ingress drift, fixed by one round in two groups of one operation. */
async function twoGroupRound(
  h: TemporalHarness,
  b: DriftTestBed,
): Promise<{ args: DriftRoundInput; result: DriftRoundResult }> {
  await b.inject('attribute');
  await b.inject('ingress');
  const args = roundInput(b.repoUrl, { drift_group_operations: 1, max_drift_reports: 1 });
  const result = await h.client.workflow.execute(driftRound, {
    taskQueue: h.taskQueue,
    workflowId: driftRoundWorkflowId(args.session_id, args.round_id),
    args: [args],
  });
  return { args, result };
}

/**
 * The offline model (or `inner`), whose fix of `address` adds `hcl` to main.tf beside it: at its
 * end, or (`at: 'start'`) before its first line.
 */
function besideFix(
  address: string,
  hcl: string,
  inner: OfflineModel = new OfflineModel(),
  at: 'end' | 'start' = 'end',
): OfflineModel {
  return new (class extends OfflineModel {
    override async remediate(input: Parameters<OfflineModel['remediate']>[0]) {
      const r = await inner.remediate(input);
      if (!input.operations.some((o) => o.address === address)) return r;
      const added = (text: string) => (at === 'end' ? `${text}\n${hcl}` : `${hcl}\n${text}`);
      return {
        ...r,
        edits: r.edits.map((e) => (e.path === 'main.tf' ? { ...e, content: added(e.content) } : e)),
      };
    }
  })();
}

async function cloneOf(url: string): Promise<string> {
  const dir = join(mkdtempSync(join(tmpdir(), 'kumoss-clone-')), 'c');
  await gitClient().run(['clone', '--quiet', url, dir]);
  return dir;
}
