import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PlanScanner, readPlanForDrift } from '../../activities/plan-reader';
import { deriveDrift, parsePlanJson } from '../../shared/drift';

const plan = {
  format_version: '1.2',
  terraform_version: '1.5.7',
  planned_values: {
    root_module: { resources: [{ address: 'x.y', values: { s: 'a "quoted" } ] { string' } }] },
  },
  resource_drift: [
    {
      address: 'rest_object.sg',
      mode: 'managed',
      type: 'rest_object',
      name: 'sg',
      change: { actions: ['update'], before: { data: '{"a":1}' }, after: { data: '{"a":2}' } },
    },
  ],
  resource_changes: [
    {
      address: 'rest_object.sg',
      mode: 'managed',
      type: 'rest_object',
      name: 'sg',
      change: { actions: ['update'], before: { data: '{"a":2}' }, after: { data: '{"a":1}' } },
    },
    {
      address: 'other.one',
      mode: 'managed',
      type: 'other',
      name: 'one',
      change: { actions: ['create'], before: null, after: { v: '\\"}' } },
    },
  ],
  prior_state: { values: { root_module: { resources: [{ address: 'rest_object.sg' }] } } },
  configuration: { provider_config: { rest: { name: 'rest' } } },
};

describe('streaming plan reader', () => {
  it('gives the same drift as parsing the whole file, whatever the chunk size', () => {
    const text = Buffer.from(JSON.stringify(plan, null, 1));
    for (const size of [1, 7, 64, text.length]) {
      const seen: Record<string, string[]> = { resource_drift: [], resource_changes: [] };
      const s = new PlanScanner((section, json) => seen[section]?.push(json));
      for (let i = 0; i < text.length; i += size) s.push(text.subarray(i, i + size));
      expect(s.topLevel).toEqual({ format_version: '1.2', terraform_version: '1.5.7' });
      expect(seen.resource_drift?.map((j) => JSON.parse(j) as unknown)).toEqual(plan.resource_drift);
      expect(seen.resource_changes?.map((j) => JSON.parse(j) as unknown)).toEqual(plan.resource_changes);
    }
  });

  it('keeps only the changes of drifted resources', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'kumoss-plan-')), 'plan.json');
    writeFileSync(file, JSON.stringify(plan));
    const reduced = await readPlanForDrift(file);
    expect(reduced.resource_changes?.map((c) => c.address)).toEqual(['rest_object.sg']);
    expect(deriveDrift(reduced)).toEqual(deriveDrift(parsePlanJson(plan)));
  });

  it("hands over every managed resource's prior values, without what the engine marks sensitive", async () => {
    const withSecrets = {
      ...plan,
      resource_changes: [
        ...plan.resource_changes,
        {
          address: 'aws_db_instance.main',
          mode: 'managed',
          type: 'aws_db_instance',
          name: 'main',
          change: {
            actions: ['no-op'],
            before: {
              id: 'db-1',
              arn: 'arn:aws:rds:eu-west-1:123456789012:db:main',
              password: 'KUMOSS-SECRET-db',
            },
            before_sensitive: { password: true, tags: {} },
            after: {},
          },
        },
        {
          address: 'data.aws_caller_identity.me',
          mode: 'data',
          type: 'aws_caller_identity',
          name: 'me',
          change: { actions: ['read'], before: { id: '123456789012' }, after: {} },
        },
      ],
    };
    const file = join(mkdtempSync(join(tmpdir(), 'kumoss-plan-')), 'plan.json');
    writeFileSync(file, JSON.stringify(withSecrets));
    const seen: { address: string; values: Record<string, unknown> }[] = [];
    await readPlanForDrift(file, (r) => seen.push({ address: r.address, values: r.values }));
    expect(seen).toEqual([
      { address: 'rest_object.sg', values: { data: '{"a":2}' } },
      {
        address: 'aws_db_instance.main',
        values: { id: 'db-1', arn: 'arn:aws:rds:eu-west-1:123456789012:db:main' },
      },
    ]);
  });
});
