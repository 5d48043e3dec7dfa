// One detection pass on a Terraform root: the engine's plan against real state, reduced to the
// drifted addresses. The first building block of a drift round; also usable on its own
// (`temporal workflow start --type detectDrift`).
import { proxyActivities, setCurrentDetails, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { DEFAULT_HEARTBEAT_SECONDS } from '../shared/workflow-inputs';
import type { DetectDriftInput, DetectDriftOutput } from '../shared/round-contracts';

const { detectDrift: detect } = proxyActivities<Activities>({
  startToCloseTimeout: '45 minutes',
  heartbeatTimeout: `${DEFAULT_HEARTBEAT_SECONDS}s`,
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
  summary: 'init, plan -out, show -json',
});

export type DetectDriftWorkflowInput = Omit<DetectDriftInput, 'artifactPrefix'> & { artifactPrefix?: string };

export async function detectDrift(input: DetectDriftWorkflowInput): Promise<DetectDriftOutput> {
  const prefix = input.artifactPrefix ?? `detections/${workflowInfo().workflowId}`;
  setCurrentDetails(`Planning ${input.repositoryUrl}${input.iacPath ? ` (${input.iacPath})` : ''}`);
  const result = await detect({ ...input, artifactPrefix: prefix });
  setCurrentDetails(
    result.drifted.length === 0
      ? 'No drift'
      : `${result.drifted.length} drifted resource(s): ${result.drifted.join(', ')}`,
  );
  return result;
}
