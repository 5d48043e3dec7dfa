// One measurement: stream-read a plan, derive the drift, split, drop exceptions, group in 8s.
// Prints JSON: wall time of the pipeline and the peak RSS above the process's baseline.
import { join } from 'node:path';
import { readPlanForDrift } from '../activities/plan-reader';
import { PromptCatalogue } from '../activities/prompt-catalogue';
import { projectRoot } from '../shared/infra/config';
import { deriveDrift, groupOperations } from '../shared/drift';
import { applyExceptions } from '../shared/drift-exceptions';

const file = process.argv[2] as string;
const rules = new PromptCatalogue(join(projectRoot, 'prompts')).driftExceptions('aws').rules;
const baseline = process.resourceUsage().maxRSS;
const t0 = performance.now();
const plan = await readPlanForDrift(file);
const ops = deriveDrift(plan);
const { survivors } = applyExceptions(ops, rules);
const groups = groupOperations(survivors, 8);
const ms = performance.now() - t0;
console.log(
  JSON.stringify({
    ms,
    peakKiB: process.resourceUsage().maxRSS - baseline,
    baselineKiB: baseline,
    drift: ops.length,
    groups: groups.length,
  }),
);
