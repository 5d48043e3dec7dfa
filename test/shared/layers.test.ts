// The layer rules are lint rules (eslint.config.js), and this proves they bite: a workflow that
// imports Node-only infrastructure or an activity's code, a sandbox-safe shared/ module that reaches
// for Node, and the API importing a workflow are each refused; the same imports as types pass. A
// workflow takes no value from the API's contract modules, and the workflow bundle proves it holds
// none of them (the sandbox evaluates a workflow's modules again for each workflow it creates).
import { bundleWorkflowCode } from '@temporalio/worker';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
import config from '../../eslint.config.js';
import { projectRoot } from '../../shared/infra/config';
import { workflowsPath } from '../../worker/worker';

// The project's own layer blocks, without the type-aware rules (which need files on disk).
const layers = (config as Linter.Config[]).filter((c) => c.rules?.['no-restricted-imports']);
const eslint = new ESLint({
  cwd: projectRoot,
  overrideConfigFile: true,
  overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } }, ...layers],
});

async function refusals(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: file });
  return (result?.messages ?? []).map((m) => `${m.ruleId}: ${m.message}`);
}

describe('layer rules', () => {
  it('a workflow may not import shared/infra/ or an activity module, except as types', async () => {
    for (const code of [
      "import { loadConfig } from '../shared/infra/config';\nexport const x = loadConfig;\n",
      "import { createDb } from '../shared/infra/db';\nexport const x = createDb;\n",
      "import { insertSession } from '../shared/infra/db/sessions';\nexport const x = insertSession;\n",
      "import { createActivities } from '../activities';\nexport const x = createActivities;\n",
      "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
    ]) {
      const found = await refusals('workflows/probe.ts', code);
      expect(found, code).toHaveLength(1);
      expect(found[0]).toMatch(/^no-restricted-imports: /);
    }
    expect(
      await refusals(
        'workflows/probe.ts',
        "import type { Db } from '../shared/infra/db';\nimport type { Activities } from '../activities';\nimport { roundArtifactKey } from '../shared/ids';\nexport type X = [Db, Activities, typeof roundArtifactKey];\n",
      ),
    ).toEqual([]);
  });

  it('shared/ outside infra/ stays sandbox-safe: no Node built-ins, shared/infra/ as types only', async () => {
    expect(
      await refusals(
        'shared/probe.ts',
        "import { createHash } from 'node:crypto';\nexport const x = createHash;\n",
      ),
    ).toHaveLength(1);
    expect(
      await refusals(
        'shared/probe.ts',
        "import { loadConfig } from './infra/config';\nexport const x = loadConfig;\n",
      ),
    ).toHaveLength(1);
    expect(
      await refusals(
        'shared/probe.ts',
        "import type { KumossConfig } from './infra/config';\nexport type X = KumossConfig;\n",
      ),
    ).toEqual([]);
    // shared/infra/ itself is Node code.
    expect(
      await refusals(
        'shared/infra/probe.ts',
        "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
      ),
    ).toEqual([]);
  });

  it('the API never imports workflow code', async () => {
    expect(
      await refusals(
        'api/probe.ts',
        "import { session } from '../workflows/session';\nexport const x = session;\n",
      ),
    ).toHaveLength(1);
  });

  it("a workflow takes values from the workflow inputs, not the API's contracts; the bundle holds none of them", async () => {
    for (const code of [
      "import { sessionDetailSchema } from '../shared/contracts';\nexport const x = sessionDetailSchema;\n",
      "import { stackSchema } from '../shared/stack-contracts';\nexport const x = stackSchema;\n",
      "import { runnerGroupSchema } from '../shared/runner-contracts';\nexport const x = runnerGroupSchema;\n",
      "import { deriveDrift } from '../shared/drift';\nexport const x = deriveDrift;\n",
    ]) {
      const found = await refusals('workflows/probe.ts', code);
      expect(found, code).toEqual([
        expect.stringMatching(/^no-restricted-imports: .*shared\/workflow-inputs/),
      ]);
    }
    expect(
      await refusals(
        'workflows/probe.ts',
        "import type { SessionState } from '../shared/contracts';\nimport { driftRoundInputSchema } from '../shared/workflow-inputs';\nexport type X = [SessionState, typeof driftRoundInputSchema];\n",
      ),
    ).toEqual([]);

    const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
    const { code } = await bundleWorkflowCode({ workflowsPath, logger: silent });
    const shared = [...new Set(code.match(/"\.\/shared\/[\w/-]+\.ts"/g))].map((m) => m.slice(3, -1)).sort();
    expect(shared).toEqual([
      'shared/errors.ts',
      'shared/ids.ts',
      'shared/messages.ts',
      'shared/runner-dags.ts',
      'shared/runner-inputs.ts',
      'shared/search-attributes.ts',
      'shared/workflow-inputs.ts',
    ]);
  });
});
