// The worker's workflow bundle is built once for each version of the code that goes into it: a
// second start on the same code reads it from the cache; a change to a workflow, to shared/ or to
// the lockfile bundles again. The real bundler on the real workflows.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { workflowsPath } from '../../worker/worker';
import { cachedWorkflowBundle, workflowBundleKey } from '../../worker/workflow-bundle';

describe('the workflow bundle cache', () => {
  it('bundles once and reads the bundle from the cache on the next start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-bundles-'));
    const first = await cachedWorkflowBundle(workflowsPath, { dir });
    expect(first.built).toBe(true);
    expect(readFileSync(first.path, 'utf8')).toContain('driftRound');
    const again = await cachedWorkflowBundle(workflowsPath, { dir });
    expect(again).toEqual({ path: first.path, built: false });
    expect(readdirSync(dir)).toEqual([first.path.slice(dir.length + 1)]);
  }, 120_000);

  it('keys the bundle by the workflows, shared/ and the lockfile, and by nothing else', () => {
    const root = mkdtempSync(join(tmpdir(), 'kumoss-bundle-key-'));
    for (const d of ['workflows', 'shared/infra', 'api']) mkdirSync(join(root, d), { recursive: true });
    cpSync(workflowsPath, join(root, 'workflows', 'index.ts'));
    writeFileSync(join(root, 'shared', 'messages.ts'), 'export const a = 1;\n');
    writeFileSync(join(root, 'shared', 'infra', 'config.ts'), 'export const b = 1;\n');
    writeFileSync(join(root, 'package-lock.json'), '{"lockfileVersion":3}\n');
    writeFileSync(join(root, 'api', 'main.ts'), 'export {};\n');
    const entry = join(root, 'workflows', 'index.ts');
    const key = () => workflowBundleKey(entry, root);

    const k0 = key();
    expect(key()).toBe(k0);
    writeFileSync(join(root, 'api', 'main.ts'), 'export const changed = true;\n');
    expect(key()).toBe(k0);

    writeFileSync(join(root, 'shared', 'infra', 'config.ts'), 'export const b = 2;\n');
    const k1 = key();
    expect(k1).not.toBe(k0);
    writeFileSync(join(root, 'workflows', 'new-workflow.ts'), 'export {};\n');
    const k2 = key();
    expect(k2).not.toBe(k1);
    writeFileSync(join(root, 'package-lock.json'), '{"lockfileVersion":3,"packages":{}}\n');
    expect(key()).not.toBe(k2);
  });
});
