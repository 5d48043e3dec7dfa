// One drift round in groups of one operation, for the replay test's histories: recorded by
// `npm run record-histories` (test/support/record-histories.ts) with the others.
import { randomUUID } from 'node:crypto';
import { createDriftTestBed } from './drift-test-bed';
import type { startStackWorker } from './test-stack';
import { driftRound } from '../../workflows';
/**
 * A full round in groups of one operation on a bed of its own (two drifted resources: two
 * groups), recorded as `name`: the groups' changes proposed at once and committed in turn, the
 * whole root's plan (`drift-round-groups` was recorded before proposals: the groups' targeted plans
 * beside the generation, the groups left to the whole root).
 */
export async function recordGroupsRound(
  client: Awaited<ReturnType<typeof startStackWorker>>['client'],
  git: Awaited<ReturnType<typeof startStackWorker>>['git'],
  engine: Awaited<ReturnType<typeof startStackWorker>>['engine'],
  gitHostUrl: string,
  save: (name: string, workflowId: string) => Promise<void>,
  name = 'drift-round-proposals',
): Promise<void> {
  const bed = await createDriftTestBed({ gitHostUrl, git, engine });
  await bed.inject('attribute');
  await bed.inject('ingress');
  const id = `record-groups-${randomUUID().slice(0, 8)}`;
  await client.workflow.execute(driftRound, {
    taskQueue: 'record',
    workflowId: id,
    args: [
      {
        session_id: 'rec-groups',
        round_id: 'r1',
        mode: 'full',
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'record',
        text: 'Reconcile everything.',
        drift_group_operations: 1,
        max_drift_reports: 2,
      },
    ],
  });
  await save(name, id);
}
