// What a workflow start costs the worker in module evaluation: the reusable V8 context gives each
// workflow a module cache of its own, so every module the workflow bundle holds is evaluated again
// for each workflow the worker creates (every start, and every replay after a cache eviction).
// Measured side by side on the worker's bundle and on the same bundle with the API's contract
// modules imported too (what the workflows imported before they took their values from
// shared/workflow-inputs.ts and shared/runner-inputs.ts). The per-workflow cache is the SDK's
// mechanism (a `__webpack_module_cache__` swapped per workflow); the workflow code itself runs no
// further than its module scope.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import vm from 'node:vm';
import { bundleWorkflowCode } from '@temporalio/worker';
import { projectRoot } from '../shared/infra/config';
import { workflowsPath } from '../worker/worker';

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const ROUNDS = Number(process.env.BENCH_WORKFLOW_STARTS ?? 300);

/** Milliseconds a workflow's module evaluation takes (median of ROUNDS), and the modules evaluated. */
function perWorkflow(code: string): { ms: number; modules: number } {
  const context = vm.createContext({});
  let cache = new Map<string | symbol, unknown>();
  Object.defineProperty(context, '__webpack_module_cache__', {
    value: new Proxy(
      {},
      {
        get: (_, p) => cache.get(p),
        set: (_, p, v) => (cache.set(p, v), true),
      },
    ),
  });
  vm.runInContext(code, context);
  const importWorkflows = vm.runInContext('__TEMPORAL__.importWorkflows', context) as () => unknown;
  const times: number[] = [];
  for (let i = 0; i < ROUNDS + 30; i++) {
    cache = new Map();
    const t = performance.now();
    importWorkflows();
    if (i >= 30) times.push(performance.now() - t); // the first 30: the JIT warming up
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)]!, modules: cache.size };
}

const worker = (await bundleWorkflowCode({ workflowsPath, logger: silent })).code;
const dir = mkdtempSync(join(projectRoot, '.bench-workflow-start-'));
let withContracts: string;
try {
  writeFileSync(
    join(dir, 'index.ts'),
    [
      `export * from ${JSON.stringify(workflowsPath.replace(/\.ts$/, ''))};`,
      ...['contracts', 'runner-contracts', 'stack-contracts', 'audit-events', 'drift-exceptions'].map(
        (m) => `import ${JSON.stringify(join(projectRoot, 'shared', m))};`,
      ),
      '',
    ].join('\n'),
  );
  withContracts = (await bundleWorkflowCode({ workflowsPath: join(dir, 'index.ts'), logger: silent })).code;
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// Alternated, so both see the same machine.
const a1 = perWorkflow(worker);
const b1 = perWorkflow(withContracts);
const a2 = perWorkflow(worker);
const b2 = perWorkflow(withContracts);
const ms = Math.min(a1.ms, a2.ms);
const contractsMs = Math.min(b1.ms, b2.ms);
console.log(
  `a workflow's module evaluation (median of ${ROUNDS}): ${ms.toFixed(2)} ms for the worker's bundle (${a1.modules} modules), ${contractsMs.toFixed(2)} ms with the API's contract modules (${b1.modules} modules): ${(contractsMs / ms).toFixed(2)}×`,
);
console.log(
  `BENCH_WORKFLOW_START ${JSON.stringify({
    workflow_module_eval_ms: Number(ms.toFixed(2)),
    workflow_module_eval_with_api_contracts_ms: Number(contractsMs.toFixed(2)),
  })}`,
);
