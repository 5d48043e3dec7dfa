// The shipped compliance policies, tested with OPA's own test runner (policies/<cloud>/*_test.rego).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../shared/infra/config';
import { toolPath, waitForTool } from '../../shared/infra/tools.mjs';

describe('compliance policies', () => {
  it('pass their Rego tests under opa test', async () => {
    await waitForTool('opa');
    const out = execFileSync(toolPath('opa'), ['test', join(projectRoot, 'policies'), '--format', 'json'], {
      encoding: 'utf8',
    });
    const results = JSON.parse(out) as { name: string; fail?: boolean; error?: unknown }[];
    expect(results.length).toBeGreaterThanOrEqual(8);
    expect(results.filter((r) => r.fail || r.error).map((r) => r.name)).toEqual([]);
  });
});
