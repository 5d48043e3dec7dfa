// The runner views' data, typed from the API's answers (web/src/api/schema.d.ts).
import { useQuery } from '@tanstack/react-query';
import type { RunnerWorkflowType } from '../../../../shared/runner-contracts';
import { api, ok, type Answer } from '../../api/client';

export type Connection = Answer<'/api/v1/cloud-connections', 'get'>['cloud_connections'][number];
export type Group = Answer<'/api/v1/runner-groups/{id}', 'get'>;
export type Run = Answer<'/api/workflows/{workflow_uuid}', 'get'>;
export type DagState = NonNullable<Run['output']>;

export function useConnections() {
  return useQuery({
    queryKey: ['runners', 'connections'],
    queryFn: async () => (await ok(api.GET('/api/v1/cloud-connections'))).cloud_connections,
  });
}

/** Starts a runner DAG on a group; answers the path of its run's view. */
export async function startRun(
  groupId: string,
  workflow_type: RunnerWorkflowType,
  initial_data: Record<string, unknown>,
): Promise<string> {
  const started = await ok(api.POST('/api/workflows/start', { body: { workflow_type, initial_data } }));
  return `/runners/${groupId}/runs/${started.workflow_uuid}`;
}
