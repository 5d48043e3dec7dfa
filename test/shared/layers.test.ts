// The layer rules are lint rules (eslint.config.js), and this proves they bite: a workflow that
// imports Node-only infrastructure or an activity's code, a sandbox-safe shared/ module that reaches
// for Node, and the API importing a workflow are each refused; the same imports as types pass.
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
import config from '../../eslint.config.js';
import { projectRoot } from '../../shared/infra/config';

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
});
