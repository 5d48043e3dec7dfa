// The runner drift plan's pure logic, and the DAGs declared as data.
import { describe, expect, it } from 'vitest';
import { createRunnerActivities } from '../../activities/runners';
import type { Db } from '../../shared/infra/db';
import {
  RUNNER_RESOURCES,
  SEED_OUTPUT_FIELDS,
  withSeedFields,
  type DetectorResult,
  type RunnerDagState,
} from '../../shared/runner-contracts';
import { DETECT_DAG, REPAIR_DAG, dagActivityTypes } from '../../shared/runner-dags';
import { buildPlan, detectOutcome, differences } from '../../shared/runner-plan';

describe('differences', () => {
  it('lists the fields whose value differs and ignores expectations left undefined', () => {
    expect(differences({ a: 1, b: 'x', c: undefined }, { a: 2, b: 'x', c: 5 })).toEqual([
      { field: 'a', expected: 1, actual: 2 },
    ]);
    expect(differences({ a: 1 }, {})).toEqual([{ field: 'a', expected: 1, actual: null }]);
  });
});

describe('buildPlan', () => {
  const r = (
    resource: DetectorResult['resource'],
    status: DetectorResult['status'],
    extra: Partial<DetectorResult> = {},
  ) => ({ resource, status, target: resource, ...extra }) as DetectorResult;

  it('is clean when every checked resource is in sync; skipped ones do not count as checked', () => {
    const plan = buildPlan({
      drift_detect_ecs_cluster: r('ecs_cluster', 'in_sync'),
      drift_detect_cloud_run_job: r('cloud_run_job', 'skipped'),
    });
    expect(plan.plan_status).toBe('clean');
    expect(plan.drift_summary).toMatchObject({ checked: 1, skipped: 1, in_sync: 1, drifted: 0, blocked: 0 });
    expect(detectOutcome(plan, false)).toBe('clean');
  });

  it('turns missing and drifted resources into actions, and unrepairable ones into blocked resources', () => {
    const plan = buildPlan({
      drift_detect_ecs_cluster: r('ecs_cluster', 'missing', { action: 'create' }),
      drift_detect_log_group: r('log_group', 'drifted', {
        action: 'update',
        differences: [{ field: 'retention_days', expected: 14, actual: 3 }],
      }),
      drift_detect_pull_secret: r('pull_secret', 'blocked', { reason: 'needs credentials' }),
    });
    expect(plan.plan_status).toBe('drifted');
    expect(plan.actions_needed.map((a) => `${a.step}:${a.action}`)).toEqual([
      'drift_detect_ecs_cluster:create',
      'drift_detect_log_group:update',
    ]);
    expect(plan.blocked_resources).toEqual([
      {
        resource: 'pull_secret',
        step: 'drift_detect_pull_secret',
        target: 'pull_secret',
        reason: 'needs credentials',
      },
    ]);
    expect(detectOutcome(plan, false)).toBe('drift_found');
    expect(detectOutcome(plan, true)).toBe('repair_started');
  });

  it('is blocked when nothing can be repaired but something needs a person', () => {
    const plan = buildPlan({ drift_detect_pull_secret: r('pull_secret', 'blocked') });
    expect(plan.plan_status).toBe('blocked');
    expect(plan.blocked_resources[0]?.reason).toMatch(/cannot repair/);
  });
});

describe('the DAGs as data', () => {
  it('the detect DAG is the seed table: init, seven detectors in parallel, plan, finalize', () => {
    expect(DETECT_DAG.layers.map((l) => l.name)).toEqual(['init', 'detect', 'plan', 'finalize']);
    expect(DETECT_DAG.layers[1]?.steps.map((s) => s.activity)).toEqual(
      RUNNER_RESOURCES.map((r) => `runner.drift_detect_${r}`),
    );
    expect(DETECT_DAG.mutating).toBe(false);
    expect(DETECT_DAG.layers.flatMap((l) => l.steps).every((s) => !s.compensation)).toBe(true);
  });

  it('the repair DAG is mutating and every step that creates something has a compensation', () => {
    expect(REPAIR_DAG.mutating).toBe(true);
    const steps = REPAIR_DAG.layers.flatMap((l) => l.steps);
    for (const r of RUNNER_RESOURCES) {
      const step = steps.find((s) => s.name === `drift_repair_${r}`);
      expect(step, r).toBeTruthy();
      if (r !== 'pull_secret') expect(step?.compensation).toBe(`runner.drift_compensate_${r}`);
    }
  });

  it('the worker registers an activity for every step and compensation both DAGs name', () => {
    const activities = createRunnerActivities({
      db: {} as Db,
      clients: () => Promise.resolve({}),
    });
    for (const type of [
      ...dagActivityTypes(DETECT_DAG),
      ...dagActivityTypes(REPAIR_DAG),
      'runner.record_execution',
    ]) {
      expect(activities, type).toHaveProperty([type]);
    }
  });

  it('withSeedFields gives every field of the seed output schema, keeping the values set', () => {
    const out = withSeedFields({ runner_group_uuid: 'g', status: 'completed' } as RunnerDagState);
    for (const f of SEED_OUTPUT_FIELDS) expect(out).toHaveProperty(f);
    expect(out.runner_group_uuid).toBe('g');
    expect(out.plan_uuid).toBeNull();
  });
});
