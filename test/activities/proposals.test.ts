// An iteration's changes proposed at once (proposeRemediations) and committed by its cycles: on the
// real stack (git host, object store, the engine's fmt), with the offline model counted. Proposed
// changes commit what cycles asking the model one after another commit; a change that overlaps an
// earlier group's, or a proposal the files no longer fit, is left to the model in its cycle.
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { key, type GenerateOutput } from '../../activities/drift-round';
import { OfflineModel } from '../../activities/model/offline';
import type { RoundRef } from '../../activities/workspace';
import { firstIteration } from '../support/round-steps';
import type { Activities } from '../../activities';
import type { CycleInput, ProposeOutput } from '../../shared/round-contracts';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  gitClient,
  newTestBed,
  stack,
  storeRefusingOnce,
  testActivities,
} from '../support/stack';

type RemediateInput = Parameters<OfflineModel['remediate']>[0];

/** The offline model, counting what it is asked: the first address of each request's group. */
class CountedModel extends OfflineModel {
  readonly asked: string[] = [];
  constructor(
    private readonly alter: (
      input: RemediateInput,
      r: Awaited<ReturnType<OfflineModel['remediate']>>,
    ) => typeof r = (_, r) => r,
  ) {
    super();
  }
  override async remediate(input: RemediateInput) {
    this.asked.push(input.operations[0]?.address ?? '');
    return this.alter(input, await super.remediate(input));
  }
}

/** The bed's two drifts (both in main.tf), planned by iteration 1 of a new round in groups of one. */
async function twoGroups(bed: DriftTestBed, acts: Activities, env: MockActivityEnvironment) {
  const { ref, det } = await firstIteration(bed, acts, env, 1);
  expect(det.groupCount).toBe(2);
  const cycle = (group: number, proposal?: boolean): CycleInput => ({
    ref,
    iteration: '1',
    group,
    operationsKey: det.operationsKey,
    groupSize: 1,
    targets: [],
    ...(proposal ? { proposal } : {}),
  });
  const propose = (): Promise<ProposeOutput> =>
    env.run((i: Parameters<typeof acts.proposeRemediations>[0]) => acts.proposeRemediations(i), {
      ref,
      iteration: '1',
      operationsKey: det.operationsKey,
      groupSize: 1,
    });
  const generate = (c: CycleInput): Promise<GenerateOutput> =>
    env.run((i: Parameters<typeof acts.generateRemediation>[0]) => acts.generateRemediation(i), c);
  /** The proposed changes of `groups` committed in one step, by `by` (default: the same worker). */
  const commitTogether = (groups: number[], by: Activities = acts): Promise<GenerateOutput[]> =>
    env.run((i: Parameters<typeof by.commitProposals>[0]) => by.commitProposals(i), {
      ref,
      iteration: '1',
      operationsKey: det.operationsKey,
      groupSize: 1,
      targets: [],
      groups,
    });
  return { ref, det, cycle, propose, generate, commitTogether };
}

/** main.tf on the branch, as the git host holds it. */
async function branchFile(bed: DriftTestBed, ref: RoundRef): Promise<string> {
  const dir = `${stack().gitReposDir}/${new URL(bed.repoUrl).pathname.slice(1)}`;
  return gitClient().run(['show', `${ref.branch}:main.tf`], dir);
}

describe('changes proposed at once', () => {
  let b: DriftTestBed;
  beforeAll(async () => {
    b = await newTestBed();
    await b.inject('attribute');
    await b.inject('ingress');
  });
  afterAll(async () => {
    await b?.destroy();
  });

  it('commit what cycles asking the model in turn commit, without asking it again', async () => {
    const env = new MockActivityEnvironment();
    // One after another, each cycle asking the model.
    const serialModel = new CountedModel();
    const serial = await twoGroups(b, testActivities({ model: serialModel }), env);
    for (const g of [0, 1]) expect((await serial.generate(serial.cycle(g))).changed).toBe(true);

    const model = new CountedModel();
    const acts = testActivities({ model });
    const at = await twoGroups(b, acts, env);
    expect(await at.propose()).toEqual({ proposed: [0, 1] });
    expect([...model.asked].sort()).toEqual([DRIFT_ADDRESSES.attribute, DRIFT_ADDRESSES.ingress].sort());
    // A retry asks only for the answers it lacks: none.
    expect(await at.propose()).toEqual({ proposed: [0, 1] });
    const commits = await at.commitTogether([0, 1]);
    expect(commits.map((c) => c.changed)).toEqual([true, true]);
    expect(model.asked).toHaveLength(2);
    // Group 2's change merged onto group 1's, in the same file: the same text as the serial cycles'.
    expect(await branchFile(b, at.ref)).toBe(await branchFile(b, serial.ref));
    // Two commits, one on the other, the second the branch's head on the git host; each with its diff.
    const [first, second] = commits.map((c) => c.commit as string);
    expect(first).not.toBe(second);
    const hosted = `${stack().gitReposDir}/${new URL(b.repoUrl).pathname.slice(1)}`;
    expect((await gitClient().run(['rev-parse', at.ref.branch], hosted)).trim()).toBe(second);
    expect((await gitClient().run(['rev-parse', `${second}^`], hosted)).trim()).toBe(first);
    for (const g of [0, 1])
      expect(await artifactStore().getText(key(at.ref, `iteration-1/group-${g}/changes.diff`))).toContain(
        '--- a/main.tf',
      );
    // A retry of the step finds both commits and commits nothing more.
    expect(await at.commitTogether([0, 1])).toEqual(commits);
    expect((await gitClient().run(['rev-parse', at.ref.branch], hosted)).trim()).toBe(second);
  });

  it('store every proposed answer before the first commit: a store that fails leaves nothing committed', async () => {
    // The object store refuses group 2's answer once.
    const real = artifactStore();
    const flaky = storeRefusingOnce((k) => k.endsWith('/group-1/remediation.json'), real);
    const workDir = mkdtempSync(join(tmpdir(), 'kumoss-proposals-'));
    const env = new MockActivityEnvironment();
    const at = await twoGroups(b, testActivities({ artifacts: flaky, workDir }), env);
    expect(await at.propose()).toEqual({ proposed: [0, 1] });
    await expect(at.commitTogether([0, 1])).rejects.toThrow('object store unavailable');
    // Not even group 1's change is committed in the worker's checkout: no commit without every
    // answer stored, so a retry never finds a commit whose answer is missing.
    const [session] = readdirSync(workDir);
    const checkout = join(workDir, session ?? '', 'repo');
    expect(await gitClient().run(['log', '--format=%H', '-F', '--grep=Kumoss-Cycle:'], checkout)).toBe('');
    // The retry commits both, each with its stored answer.
    const commits = await at.commitTogether([0, 1]);
    expect(commits.map((c) => c.changed)).toEqual([true, true]);
    for (const [g, c] of commits.entries())
      expect(JSON.parse(await real.getText(c.resultKey))).toMatchObject({
        commit: c.commit,
        resultKey: key(at.ref, `iteration-1/group-${g}/remediation.json`),
      });
  });

  it('adopt the commits of an earlier attempt whose push landed after the retry began', async () => {
    const env = new MockActivityEnvironment();
    const first = testActivities();
    const at = await twoGroups(b, first, env);
    expect(await at.propose()).toEqual({ proposed: [0, 1] });
    // A second worker holds the branch where the step begins (its checkout made by its own call).
    const second = testActivities();
    expect(
      await env.run((i: Parameters<typeof second.proposeRemediations>[0]) => second.proposeRemediations(i), {
        ref: at.ref,
        iteration: '1',
        operationsKey: at.det.operationsKey,
        groupSize: 1,
      }),
    ).toEqual({ proposed: [0, 1] });
    const landed = await at.commitTogether([0, 1]);
    // The retry's commits are made in a later second than the pushed ones: other commits, the
    // same changes, rejected by the git host (the branch moved), then adopted.
    const pushedIn = Math.floor(Date.now() / 1000);
    await new Promise<void>((resolve) => {
      const tick = () => (Math.floor(Date.now() / 1000) > pushedIn ? resolve() : setTimeout(tick, 20));
      tick();
    });
    const retried = await at.commitTogether([0, 1], second);
    expect(retried).toEqual(landed);
    // Each cycle's recorded result names the commit the branch holds.
    for (const [g, c] of landed.entries())
      expect(
        JSON.parse(await artifactStore().getText(key(at.ref, `iteration-1/group-${g}/remediation.json`))),
      ).toMatchObject({ commit: c.commit, changed: true });
    const hosted = `${stack().gitReposDir}/${new URL(b.repoUrl).pathname.slice(1)}`;
    expect((await gitClient().run(['rev-parse', at.ref.branch], hosted)).trim()).toBe(landed[1]?.commit);
  });

  it('leave to its cycle a change that overlaps an earlier group’s', async () => {
    // Each group's fix also appends a line at the end of main.tf: the two answers overlap there.
    const model = new CountedModel((input, r) => ({
      ...r,
      edits: r.edits.map((e) =>
        e.path === 'main.tf'
          ? { ...e, content: `${e.content}\n# fixed ${input.operations[0]?.address}\n` }
          : e,
      ),
    }));
    const env = new MockActivityEnvironment();
    const at = await twoGroups(b, testActivities({ model }), env);
    expect(await at.propose()).toEqual({ proposed: [0] });
    expect((await at.generate(at.cycle(0, true))).changed).toBe(true);
    expect(model.asked).toHaveLength(2);
    // The workflow does not mark group 2 proposed: its cycle asks the model on the code as it is.
    expect((await at.generate(at.cycle(1))).changed).toBe(true);
    expect(model.asked).toHaveLength(3);
    const main = await branchFile(b, at.ref);
    expect(main).toContain(`# fixed ${DRIFT_ADDRESSES.attribute}`);
    expect(main).toContain(`# fixed ${DRIFT_ADDRESSES.ingress}`);
  });

  it('never propose an answer that names a path outside the checkout: its cycle refuses it', async () => {
    // The ingress group's answer also writes beside the repository.
    const model = new CountedModel((input, r) =>
      input.operations[0]?.address === DRIFT_ADDRESSES.ingress
        ? { ...r, edits: [...r.edits, { path: '../outside.tf', content: 'output "x" { value = 1 }\n' }] }
        : r,
    );
    const env = new MockActivityEnvironment();
    const at = await twoGroups(b, testActivities({ model }), env);
    expect(await at.propose()).toEqual({ proposed: [0] });
    expect((await at.generate(at.cycle(0, true))).changed).toBe(true);
    await expect(at.generate(at.cycle(1))).rejects.toThrow(/outside/);
    // Nothing of the refused answer reached the branch.
    expect(await branchFile(b, at.ref)).not.toContain('output "x"');
  });

  it('ask the model again for a proposal the files no longer fit', async () => {
    // Group 1's cycle asks the model itself (as after a failed request) and its answer this time
    // also appends a comment: group 2's proposal expected main.tf without it.
    let second = false;
    const model = new CountedModel((input, r) =>
      second && input.operations[0]?.address === DRIFT_ADDRESSES.attribute
        ? {
            ...r,
            edits: r.edits.map((e) =>
              e.path === 'main.tf' ? { ...e, content: `${e.content}# reviewed\n` } : e,
            ),
          }
        : r,
    );
    const env = new MockActivityEnvironment();
    const at = await twoGroups(b, testActivities({ model }), env);
    expect(await at.propose()).toEqual({ proposed: [0, 1] });
    second = true;
    expect((await at.generate(at.cycle(0))).changed).toBe(true);
    expect((await at.generate(at.cycle(1, true))).changed).toBe(true);
    // Both proposals, then group 1's own request and group 2's: its proposal did not fit.
    expect(model.asked).toEqual([
      expect.any(String),
      expect.any(String),
      DRIFT_ADDRESSES.attribute,
      DRIFT_ADDRESSES.ingress,
    ]);
    const main = await branchFile(b, at.ref);
    expect(main).toContain('# reviewed');
  });
});
