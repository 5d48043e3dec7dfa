// /runners/<group>: a runner group — its environment, a drift detection started on it (auto-apply
// for devops only, off by default, with a warning that it changes infrastructure), its executions.
import { useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, ok, type Me } from '../../api/client';
import { Alert } from '../../components/Alert';
import { Link } from '../../components/Link';
import { QueryState } from '../../components/QueryState';
import { navigate } from '../../router';
import { GroupForm } from './GroupForm';
import { startRun, useConnections, type Group } from './data';

export function GroupView({ groupId, me }: { groupId: string; me: Me }) {
  const canEdit = me.role !== 'developer';
  const connections = useConnections();
  const group = useQuery({
    queryKey: ['runners', 'group', groupId],
    queryFn: () => ok(api.GET('/api/v1/runner-groups/{id}', { params: { path: { id: groupId } } })),
  });
  const executions = useQuery({
    queryKey: ['runners', 'executions', groupId],
    refetchInterval: (q) => (q.state.data?.some((e) => e.status === 'running') ? 2000 : false),
    queryFn: async () =>
      (await ok(api.GET('/api/v1/runner-groups/{id}/executions', { params: { path: { id: groupId } } })))
        .executions,
  });
  if (group.isPending) return <p role="status">Loading the runner group…</p>;
  if (group.isError)
    return (
      <p className="error" role="alert">
        {group.error.message}
      </p>
    );
  const g = group.data;
  return (
    <section aria-labelledby="group-title">
      <p>
        <Link to="/runners">← Runner groups</Link>
      </p>
      <h1 id="group-title">Runner group {g.name}</h1>
      <dl className="facts">
        <dt>Backend</dt>
        <dd>{g.environment.backend_type}</dd>
        <dt>Cloud connection</dt>
        <dd>
          {connections.data?.find((c) => c.cloud_connection_uuid === g.cloud_connection_uuid)?.name ?? '—'}
        </dd>
        <dt>Id</dt>
        <dd className="mono">{g.runner_group_uuid}</dd>
      </dl>
      <StartDetection group={g} me={me} />
      <h2>Executions</h2>
      <QueryState query={executions} loading="Loading the executions…" empty="No execution yet.">
        {(data) => (
          <table aria-label="Executions">
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Workflow</th>
                <th scope="col">Status</th>
                <th scope="col">Outcome</th>
              </tr>
            </thead>
            <tbody>
              {data.map((e) => (
                <tr key={e.runner_execution_uuid} data-execution={e.workflow_uuid}>
                  <td>{new Date(e.created_at).toLocaleString()}</td>
                  <td>
                    <Link to={`/runners/${g.runner_group_uuid}/runs/${e.workflow_uuid}`}>
                      {e.workflow_type}
                    </Link>
                    {e.retry_count > 0 ? ` (retry ${e.retry_count})` : ''}
                  </td>
                  <td>{e.status}</td>
                  <td>{e.outcome ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
      <h2>Environment</h2>
      {canEdit ? (
        <GroupForm key={JSON.stringify(g)} connections={connections.data ?? []} group={g} />
      ) : (
        <pre className="mono" tabIndex={0}>
          {JSON.stringify(g.environment, null, 2)}
        </pre>
      )}
    </section>
  );
}

function StartDetection({ group, me }: { group: Group; me: Me }) {
  const canApply = me.role !== 'developer';
  const [autoApply, setAutoApply] = useState(false);
  const detect = useMutation({
    mutationFn: () =>
      startRun(group.runner_group_uuid, 'runner.environment-drift-detect', {
        runner_group_uuid: group.runner_group_uuid,
        auto_apply: canApply && autoApply,
      }),
    onSuccess: navigate,
  });
  return (
    <form
      className="wizard"
      aria-label="Drift detection"
      onSubmit={(e) => {
        e.preventDefault();
        detect.mutate();
      }}
    >
      <h2>Drift detection</h2>
      <label className={canApply ? '' : 'disabled'}>
        <input
          type="checkbox"
          checked={autoApply}
          disabled={!canApply}
          onChange={(e) => setAutoApply(e.target.checked)}
          aria-describedby="auto-apply-warning"
        />
        Repair automatically (auto-apply)
      </label>
      <p id="auto-apply-warning" className={autoApply ? 'warning' : 'hint'}>
        {canApply
          ? 'Auto-apply changes real infrastructure: drifted resources are recreated or updated to match the group, without review. Off by default.'
          : 'Auto-apply changes infrastructure and requires the devops operation role.'}
      </p>
      <button type="submit" disabled={detect.isPending}>
        {autoApply ? 'Detect drift and repair it' : 'Detect drift'}
      </button>
      <Alert message={detect.isError ? detect.error.message : null} />
    </form>
  );
}
