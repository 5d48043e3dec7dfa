// A stack's scheduled detection run (started by its Temporal Schedule, `drift-schedule:<stack>`):
// the stack as registered now, a plan-only detection (no model, no branch, no commit), and the
// drift inbox updated from what the run saw. A run that fails is recorded as failed and leaves
// the inbox as it was; the workflow then fails, so the Web UI shows it.
import {
  ApplicationFailure,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { KumossOutcome } from '../shared/search-attributes';
import type { StackDetectionInput, StackDetectionResult } from '../shared/stack-contracts';

const light = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
});
const engine = proxyActivities<Activities>({
  startToCloseTimeout: '45 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 3 },
  summary: 'init, plan -out, show -json, drift and exceptions',
});

export async function stackDetection(input: StackDetectionInput): Promise<StackDetectionResult> {
  // The schedule appends the scheduled time to the workflow id: one id per run.
  const run_id = workflowInfo().workflowId;
  const none = { run_id, drift_count: 0, opened: 0, resolved: 0, whitelisted: 0 };
  const stack = await light.beginStackDetection({ stack_uuid: input.stack_uuid, run_id });
  if (!stack) {
    setCurrentDetails('The stack no longer exists');
    return { ...none, status: 'skipped', reason: `Stack ${input.stack_uuid} no longer exists.` };
  }
  setCurrentDetails(`Planning ${stack.name} (${stack.repository_url})`);
  try {
    const today = new Date().toISOString().slice(0, 10);
    const plan = await engine.planStack({ stack, run_id, today });
    const inbox = await light.recordStackDetection({ stack_uuid: stack.stack_uuid, run_id, plan });
    const outcome = plan.drift_count - plan.whitelisted_count > 0 ? 'drifted' : 'clean';
    upsertSearchAttributes([{ key: KumossOutcome, value: outcome }]);
    setCurrentDetails(
      `${outcome}: ${plan.drift_count} drifted resource(s); ${inbox.opened} item(s) opened, ${inbox.resolved} resolved`,
    );
    return {
      run_id,
      status: 'completed',
      drift_count: plan.drift_count,
      opened: inbox.opened,
      resolved: inbox.resolved,
      whitelisted: inbox.whitelisted,
    };
  } catch (err) {
    const reason =
      err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    await light.failStackDetection({ run_id, error: reason });
    upsertSearchAttributes([{ key: KumossOutcome, value: 'failed' }]);
    setCurrentDetails(`Failed: ${reason}`);
    throw ApplicationFailure.nonRetryable(`Detection failed: ${reason}`, 'DetectionFailed');
  }
}
