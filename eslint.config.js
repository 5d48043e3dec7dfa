// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.kumoss/**', 'coverage/**', 'web/dist/**', 'web/src/api/schema.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: { ...globals.node },
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: { 'import-x/ignore': ['node_modules'], 'import-x/extensions': ['.ts', '.js', '.mjs'] },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no console.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'child_process', 'crypto', 'os'],
              message: 'Workflows must stay sandbox-safe.',
            },
            {
              group: [
                '@temporalio/activity',
                '@temporalio/client',
                '@temporalio/worker',
                '**/activities',
                '**/activities/*',
                // shared/infra/ is Node-only infrastructure: the configuration, the metadata store,
                // the object store, connections, tracing, logging, secrets, signatures, the tool cache.
                '**/shared/infra',
                '**/shared/infra/*',
                '**/shared/infra/**',
              ],
              allowTypeImports: true,
              message:
                'Workflows import activities, clients and shared/infra/ (Node-only infrastructure) as types only.',
            },
            {
              // The workflow sandbox evaluates a workflow's imports again for every workflow the
              // worker creates: these modules build the API's schemas, hundreds of them.
              group: [
                '**/shared/contracts',
                '**/shared/runner-contracts',
                '**/shared/stack-contracts',
                '**/shared/audit-events',
                '**/shared/webhook-contracts',
                '**/shared/drift',
                '**/shared/drift-exceptions',
                '**/shared/drift-report',
              ],
              allowTypeImports: true,
              message:
                'Workflows take values from shared/workflow-inputs or shared/runner-inputs; the API contract modules as types only (each workflow start evaluates its imports again).',
            },
          ],
        },
      ],
    },
  },
  {
    // shared/ outside infra/ is what workflows may import: contracts, ids, errors, pure drift
    // logic, message definitions. It stays sandbox-safe itself.
    files: ['shared/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'child_process', 'crypto', 'os', 'pg', 'pino', 'kysely'],
              message: 'shared/ is imported by workflows: Node-only code goes in shared/infra/.',
            },
            {
              group: ['./infra', './infra/*', './infra/**', '@temporalio/client', '@temporalio/activity'],
              allowTypeImports: true,
              message: 'shared/ is imported by workflows: it imports shared/infra/ as types only.',
            },
          ],
        },
      ],
    },
  },
  {
    // The API starts workflows by name and talks to them through definitions in shared/.
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../workflows', '../workflows/*', '../../workflows', '../../workflows/*'],
              message: 'The API never imports workflow code: use shared/messages.ts and workflow type names.',
            },
          ],
        },
      ],
    },
  },
  prettier,
);
