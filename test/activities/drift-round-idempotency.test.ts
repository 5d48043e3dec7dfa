// Activities run again after a crash must not do their work twice: a retried generate cycle finds
// its own commit by trailer instead of committing again, and a retried push is a no-op.
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateOutput, ValidateOutput } from '../../activities/drift-round';
import { OfflineModel } from '../../activities/model/offline';
import type { ModelProvider } from '../../activities/model/port';
import type { Activities } from '../../activities';
import { type DriftTestBed } from '../support/drift-test-bed';
import { firstIteration } from '../support/round-steps';
import { gitClient, stack, storeRefusingOnce, testActivities, newTestBed } from '../support/stack';

/** A round on `bed` up to its first cycle: prepared, iteration 1 planned, the cycle's input. */
async function firstCycle(bed: DriftTestBed, acts: Activities, env: MockActivityEnvironment) {
  const { ref, det } = await firstIteration(bed, acts, env, 8);
  const cycle = {
    ref,
    iteration: '1',
    group: 0,
    operationsKey: det.operationsKey,
    groupSize: 8,
    targets: [],
  };
  return { ref, det, cycle };
}

describe('drift round activities are idempotent', () => {
  let b: DriftTestBed;
  beforeAll(async () => {
    b = await newTestBed();
  });
  afterAll(async () => {
    await b?.destroy();
  });

  it('a retried generate cycle does not commit twice, and its retried push changes nothing', async () => {
    await b.inject('ingress');
    const env = new MockActivityEnvironment();
    // Two workers' worth of activities: the retry lands on a worker without the first's checkout.
    const first = testActivities();
    const second = testActivities();
    const { ref, det, cycle } = await firstCycle(b, first, env);
    expect(det.operationCount).toBe(1);

    const a: GenerateOutput = await env.run(
      (i: Parameters<typeof first.generateRemediation>[0]) => first.generateRemediation(i),
      cycle,
    );
    const b2: GenerateOutput = await env.run(
      (i: Parameters<typeof second.generateRemediation>[0]) => second.generateRemediation(i),
      cycle,
    );
    const c: GenerateOutput = await env.run(
      (i: Parameters<typeof first.generateRemediation>[0]) => first.generateRemediation(i),
      cycle,
    );
    expect(a.changed).toBe(true);
    expect(b2.commit).toBe(a.commit);
    expect(c.commit).toBe(a.commit);

    const remote = await gitClient().remoteBranches(b.repoUrl);
    expect(remote.get(ref.branch)).toBe(a.commit);
    const dir = `${stack().gitReposDir}/${new URL(b.repoUrl).pathname.slice(1)}`;
    const log = await gitClient().run(['log', '--format=%s', `main..${ref.branch}`], dir);
    expect(log.trim().split('\n')).toHaveLength(1);
  });

  it("a generate cycle retried after it wrote the model's edits but failed before its commit still commits them", async () => {
    await b.inject('attribute');
    // The object store refuses the cycle's answer once: the attempt fails with the edits written
    // to the checkout and nothing committed (as under load, bench/load-sessions.ts).
    const flaky = storeRefusingOnce((k) => k.endsWith('/remediation.json'));
    const acts = testActivities({ artifacts: flaky });
    const env = new MockActivityEnvironment();
    const { ref, cycle } = await firstCycle(b, acts, env);
    const run = () =>
      env.run((i: Parameters<typeof acts.generateRemediation>[0]) => acts.generateRemediation(i), cycle);
    await expect(run()).rejects.toThrow('object store unavailable');
    // The retry, on the same worker's checkout: the same change, committed and pushed once.
    const retried = (await run()) as GenerateOutput;
    expect(retried.changed).toBe(true);
    expect(retried.files.length).toBeGreaterThan(0);
    const remote = await gitClient().remoteBranches(b.repoUrl);
    expect(remote.get(ref.branch)).toBe(retried.commit);
  });

  it('a validate cycle retried after it reverted an invalid change answers invalid again and reverts once', async () => {
    const bed = await newTestBed();
    try {
      await bed.inject('attribute');
      // A model whose change does not parse: the engine rejects it for good.
      const broken: ModelProvider = Object.assign(Object.create(new OfflineModel()) as OfflineModel, {
        remediate: (i: { files: { path: string; content: string }[] }) => {
          const main = i.files.find((f) => f.path === 'main.tf') as { path: string; content: string };
          return Promise.resolve({
            edits: [
              {
                path: 'main.tf',
                content: `${main.content}\nresource "rest_object" "broken" {\n  path =\n}\n`,
              },
            ],
            unremediable: [],
          });
        },
      });
      const env = new MockActivityEnvironment();
      const first = testActivities({ model: broken });
      const second = testActivities({ model: broken });
      const { ref, cycle } = await firstCycle(bed, first, env);
      await env.run(
        (i: Parameters<typeof first.generateRemediation>[0]) => first.generateRemediation(i),
        cycle,
      );
      const a: ValidateOutput = await env.run(
        (i: Parameters<typeof first.validateRemediation>[0]) => first.validateRemediation(i),
        cycle,
      );
      // The retry lands on another worker, which checks out the pushed (reverted) branch.
      const b2: ValidateOutput = await env.run(
        (i: Parameters<typeof second.validateRemediation>[0]) => second.validateRemediation(i),
        cycle,
      );
      expect(a.valid).toBe(false);
      // Both name the revert as the branch's head.
      expect(a.head).toMatch(/^[0-9a-f]{40}$/);
      expect(b2).toEqual({ valid: false, reinitialized: false, reason: a.reason, head: a.head });
      const dir = `${stack().gitReposDir}/${new URL(bed.repoUrl).pathname.slice(1)}`;
      const log = await gitClient().run(['log', '--format=%s', `main..${ref.branch}`], dir);
      expect(
        log
          .trim()
          .split('\n')
          .filter((l) => l.startsWith('Revert')),
      ).toHaveLength(1);
    } finally {
      await bed.destroy();
    }
  });
});
