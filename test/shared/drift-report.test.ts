import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderSchema } from '../../scripts/write-schemas';
import { projectRoot } from '../../shared/infra/config';
import { computeOutcome, driftReportJsonSchema, driftReportSchema } from '../../shared/drift-report';

describe('drift report', () => {
  it('computes the outcome: whitelisted drift never lowers it, unreconciled drift does', () => {
    expect(computeOutcome(2, 0)).toBe('Succeeded');
    expect(computeOutcome(0, 0)).toBe('Succeeded');
    expect(computeOutcome(1, 1)).toBe('Partial');
    expect(computeOutcome(0, 2)).toBe('Failed');
  });

  it('accepts the leftover blocks only when they have entries', () => {
    const base = {
      session_id: 's',
      round_id: 'r',
      mode: 'full',
      summary: 'x',
      outcome: 'Succeeded',
      remediated_resources: [],
      iterations: 1,
      branch: 'kumoss/s',
    };
    expect(driftReportSchema.parse(base)).toEqual(base);
    expect(() => driftReportSchema.parse({ ...base, unreconciled_drift: [] })).toThrow();
    expect(() => driftReportSchema.parse({ ...base, extra: 1 })).toThrow();
  });

  it('publishes a JSON Schema naming the report blocks', () => {
    const schema = driftReportJsonSchema() as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining([
        'summary',
        'outcome',
        'remediated_resources',
        'unreconciled_drift',
        'whitelisted_exceptions',
      ]),
    );
    expect(schema.required).not.toContain('unreconciled_drift');
  });
});

describe('published schema', () => {
  it('schemas/drift-report.schema.json matches the zod contract (run `npm run schemas` after a change)', () => {
    const committed = readFileSync(join(projectRoot, 'schemas', 'drift-report.schema.json'), 'utf8');
    expect(committed).toBe(renderSchema('drift-report.schema.json'));
  });
});
