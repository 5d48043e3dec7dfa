import { bundleWorkflowCode } from '@temporalio/worker';
import vm from 'node:vm';
import { writeFileSync, mkdtempSync } from 'node:fs';
const targets = process.argv.slice(2);
const logger = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} } as never;
for (const t of targets) {
  const dir = '/work/main/.measure-' + Math.random().toString(36).slice(2);
  const { mkdirSync, rmSync } = await import('node:fs');
  mkdirSync(dir);
  writeFileSync(dir + '/index.ts', t === 'none' ? 'export function x() {}\n' : `export * as m from '${t}';\nexport function x() {}\n`);
  const { code } = await bundleWorkflowCode({ workflowsPath: dir + '/index.ts', logger });
  rmSync(dir, { recursive: true });
  const ctx = vm.createContext({});
  let cache = new Map<string, unknown>();
  Object.defineProperty(ctx, '__webpack_module_cache__', { value: new Proxy({}, { get: (_, p) => cache.get(p as string), set: (_, p, v) => (cache.set(p as string, v), true) }) });
  vm.runInContext(code, ctx);
  const imp = vm.runInContext('__TEMPORAL__.importWorkflows', ctx);
  for (let i = 0; i < 30; i++) { cache = new Map(); imp(); }
  const N = 200; const s = process.hrtime.bigint();
  for (let i = 0; i < N; i++) { cache = new Map(); imp(); }
  console.log(t.padEnd(40), (Number(process.hrtime.bigint() - s) / 1e6 / N).toFixed(2), 'ms', cache.size, 'modules');
}
