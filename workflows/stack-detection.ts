// A stack's detection run — scheduled (started by its Temporal Schedule, `drift-schedule:<stack>`)
// or event-driven (a child of `stackEvents`, planning only the addresses audit events touched):
// the stack as registered now, a plan-only detection (no model, no branch, no commit), and the
// drift inbox updated from what the run saw. A run that fails is recorded as failed and leaves
// the inbox as it was; the workflow then fails, so the Web UI shows it.
import {
  ApplicationFailure,
  isCancellation,
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  startChild,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { DEFAULT_HEARTBEAT_SECONDS } from '../shared/workflow-inputs';
import { detectionTaskQueue, sessionWorkflowId } from '../shared/ids';
import { KumossCloud, KumossOutcome, KumossSessionId } from '../shared/search-attributes';
import type { Stack, StackDetectionInput, StackDetectionResult } from '../shared/stack-contracts';
import type { WebhookEvent } from '../shared/webhook-contracts';
import { session } from './session';

const shortStep = {
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
} as const;
const light = proxyActivities<Activities>(shortStep);
// Reading the stack and recording the inbox are short database calls: local activities, run by
// the worker within the workflow task that asks for them (a marker in the history instead of an
// activity task through the server and one more workflow task each). Runs begun before this take
// the activity path they began with (the patch).
export const STACK_DETECTION_LOCAL_STEPS = 'stack-detection-local-steps';
const local = proxyLocalActivities<Activities>(shortStep);
// Webhook deliveries retry with backoff for about an hour; one that still fails is in the delivery
// log and does not fail the run.
const hooks = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '10 minutes', maximumAttempts: 10 },
});
export async function stackDetection(input: StackDetectionInput): Promise<StackDetectionResult> {
  // The plan runs on the detection queue beside this workflow's (shared/ids.ts): workers take as
  // many as they run at once; the rest wait in the server's queue, in order.
  const engine = proxyActivities<Activities>({
    taskQueue: detectionTaskQueue(workflowInfo().taskQueue),
    startToCloseTimeout: '45 minutes',
    heartbeatTimeout: `${DEFAULT_HEARTBEAT_SECONDS}s`,
    retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 3 },
    summary: 'init, plan -out, show -json when the plan changes something, drift and exceptions',
  });
  // The schedule appends the scheduled time to the workflow id: one id per run.
  const run_id = workflowInfo().workflowId;
  const none = { run_id, drift_count: 0, opened: 0, resolved: 0, whitelisted: 0 };
  const steps = patched(STACK_DETECTION_LOCAL_STEPS) ? local : light;
  const begun = await steps.beginStackDetection({ stack_uuid: input.stack_uuid, run_id });
  if (!begun) {
    setCurrentDetails('The stack no longer exists');
    return { ...none, status: 'skipped', reason: `Stack ${input.stack_uuid} no longer exists.` };
  }
  // Runs begun before the subscribed events came with the stack announce every event.
  const { subscribed_events, ...stack }: Stack & { subscribed_events?: WebhookEvent[] } = begun;
  setCurrentDetails(`Planning ${stack.name} (${stack.repository_url})`);
  const announce = async (event: WebhookEvent, data: Record<string, unknown>): Promise<void> => {
    // No endpoint of the organization subscribes to it: nothing to deliver, no activity.
    if (subscribed_events && !subscribed_events.includes(event)) return;
    try {
      await hooks.deliverWebhook({
        organization_uuid: stack.organization_uuid,
        delivery_id: `${run_id}:${event}`,
        event,
        at: new Date().toISOString(),
        data: { stack_uuid: stack.stack_uuid, stack: stack.name, run_id, ...data },
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      // Logged per attempt in the delivery log; the run's own result stands.
    }
  };
  let plan;
  try {
    const today = new Date().toISOString().slice(0, 10);
    plan = await engine.planStack({
      stack,
      run_id,
      today,
      ...(input.targets ? { targets: input.targets } : {}),
    });
  } catch (err) {
    const reason =
      err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    await light.failStackDetection({ run_id, error: reason });
    upsertSearchAttributes([{ key: KumossOutcome, value: 'failed' }]);
    setCurrentDetails(`Failed: ${reason}`);
    await announce('detection.failed', { reason });
    throw ApplicationFailure.nonRetryable(`Detection failed: ${reason}`, 'DetectionFailed');
  }
  // An event-driven run: who, when, how and from where, on the items it opens and in the webhook.
  const audit = input.audit?.[0];
  const inbox = await steps.recordStackDetection({
    stack_uuid: stack.stack_uuid,
    run_id,
    plan,
    ...(input.targets ? { targets: input.targets } : {}),
    ...(audit ? { audit } : {}),
  });
  const outcome = plan.operation_count > 0 ? 'drifted' : 'clean';
  upsertSearchAttributes([{ key: KumossOutcome, value: outcome }]);
  setCurrentDetails(
    `${outcome}: ${plan.drift_count} drifted resource(s); ${inbox.opened_count} item(s) opened, ${inbox.resolved} resolved`,
  );
  // Auto-remediation: new alerting items open a partial drift session on exactly them (never an
  // apply), unless the session the stack opened last is still open. The session outlives this run.
  let session_id: string | undefined;
  if (inbox.recorded && stack.auto_remediate === 'open_session' && inbox.opened.length > 0) {
    const claim = await light.openRemediationSession({
      stack,
      run_id,
      session_id: `s-${uuid4()}`,
      items: inbox.opened,
    });
    if (claim.opened) {
      const { settings } = claim;
      const round_id = `r-${uuid4().slice(0, 8)}`;
      await startChild(session, {
        workflowId: sessionWorkflowId(settings.session_id),
        args: [{ settings, first: { round_id, kind: 'partial', text: claim.text, targets: claim.targets } }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: KumossSessionId, value: settings.session_id },
          { key: KumossCloud, value: settings.cloud },
        ],
        staticSummary: `Session on ${settings.repository_url} opened by stack ${stack.name} (${run_id})`,
        memo: {
          request: {
            repository_url: settings.repository_url,
            cloud: settings.cloud,
            iac_path: settings.iac_path,
            created_by: `stack ${stack.name}`,
          },
        },
      });
      session_id = settings.session_id;
    }
  }
  if (inbox.recorded) {
    if (inbox.opened.length > 0)
      await announce('drift.detected', {
        items: inbox.opened,
        ...(session_id ? { session_id } : {}),
        audit: audit ?? null,
      });
    if (inbox.resolved_items.length > 0) await announce('drift.resolved', { items: inbox.resolved_items });
    if (outcome === 'clean') await announce('detection.clean', {});
  }
  return {
    run_id,
    status: 'completed',
    drift_count: plan.drift_count,
    opened: inbox.opened_count,
    resolved: inbox.resolved,
    whitelisted: inbox.whitelisted,
    ...(session_id ? { session_id } : {}),
  };
}
