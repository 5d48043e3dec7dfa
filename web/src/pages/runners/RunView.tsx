// /runners/<group>/runs/<workflow>: one execution, live — its DAG status, its plan (actions_needed,
// blocked_resources, drift_summary) and the repair run it chained, or the button that starts one.
import { useMutation, useQuery } from '@tanstack/react-query';
import { api, ok, type Me } from '../../api/client';
import { Alert } from '../../components/Alert';
import { Link } from '../../components/Link';
import { navigate } from '../../router';
import { startRun, type DagState } from './data';

export function RunView({ groupId, workflowId, me }: { groupId: string; workflowId: string; me: Me }) {
  const run = useQuery({
    queryKey: ['runners', 'run', workflowId],
    // Live while it runs: the run's state every second (a DAG's steps take seconds).
    refetchInterval: (q) => (q.state.data?.status === 'RUNNING' ? 1000 : false),
    queryFn: () =>
      ok(api.GET('/api/workflows/{workflow_uuid}', { params: { path: { workflow_uuid: workflowId } } })),
  });
  if (run.isPending) return <p role="status">Loading the run…</p>;
  if (run.isError)
    return (
      <p className="error" role="alert">
        {run.error.message}
      </p>
    );
  const r = run.data;
  const o = r.output;
  return (
    <section aria-labelledby="run-title">
      <p>
        <Link to={`/runners/${groupId}`}>← The runner group</Link>
      </p>
      <h1 id="run-title">{r.workflow_type}</h1>
      <dl className="facts">
        <dt>Workflow</dt>
        <dd className="mono">{r.workflow_uuid}</dd>
        <dt>Run</dt>
        <dd data-testid="run-status">{r.status}</dd>
        <dt>DAG status</dt>
        <dd data-testid="dag-status">{o?.status ?? '—'}</dd>
        <dt>Outcome</dt>
        <dd data-testid="run-outcome">{o?.outcome ?? '—'}</dd>
        {o?.failure_reason && (
          <>
            <dt>Failure</dt>
            <dd className="error">{o.failure_reason}</dd>
          </>
        )}
        {o?.plan_status && (
          <>
            <dt>Plan</dt>
            <dd data-testid="plan-status">{o.plan_status}</dd>
          </>
        )}
        {o?.repair_workflow_id && (
          <>
            <dt>Repair run</dt>
            <dd>
              <Link to={`/runners/${groupId}/runs/${o.repair_workflow_id}`}>{o.repair_workflow_id}</Link>
            </dd>
          </>
        )}
      </dl>
      {o?.drift_summary && <Summary summary={o.drift_summary} />}
      {o?.actions_needed && <Actions actions={o.actions_needed} />}
      {o?.blocked_resources && <Blocked blocked={o.blocked_resources} />}
      {me.role !== 'developer' && o?.plan_uuid && o.plan_status === 'drifted' && !o.repair_workflow_id && (
        <Repair groupId={groupId} planId={o.plan_uuid} />
      )}
    </section>
  );
}

function Summary({ summary }: { summary: NonNullable<DagState['drift_summary']> }) {
  return (
    <>
      <h2>Drift summary</h2>
      <p data-testid="drift-summary">
        {summary.checked} checked · {summary.in_sync} in sync · {summary.drifted} drifted · {summary.blocked}{' '}
        blocked · {summary.skipped} skipped
      </p>
      <table aria-label="Resources">
        <thead>
          <tr>
            <th scope="col">Resource</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {Object.entries(summary.resources).map(([k, v]) => (
            <tr key={k}>
              <td className="mono">{k}</td>
              <td>{String(v)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Actions({ actions }: { actions: NonNullable<DagState['actions_needed']> }) {
  return (
    <>
      <h2>Actions needed</h2>
      {actions.length === 0 ? (
        <p className="empty">None: the environment matches the group.</p>
      ) : (
        <table aria-label="Actions needed">
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Action</th>
              <th scope="col">Target</th>
              <th scope="col">Differences</th>
            </tr>
          </thead>
          <tbody>
            {actions.map((a) => (
              <tr key={`${a.resource}:${a.target}`}>
                <td className="mono">{a.resource}</td>
                <td>{a.action}</td>
                <td className="mono">{a.target}</td>
                <td className="mono">
                  {a.differences
                    .map((d) => `${d.field}: ${JSON.stringify(d.actual)} → ${JSON.stringify(d.expected)}`)
                    .join('; ')}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function Blocked({ blocked }: { blocked: NonNullable<DagState['blocked_resources']> }) {
  if (blocked.length === 0) return null;
  return (
    <>
      <h2>Blocked resources</h2>
      <table aria-label="Blocked resources">
        <thead>
          <tr>
            <th scope="col">Resource</th>
            <th scope="col">Target</th>
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {blocked.map((b) => (
            <tr key={`${b.resource}:${b.target}`}>
              <td className="mono">{b.resource}</td>
              <td className="mono">{b.target}</td>
              <td>{b.reason}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Repair({ groupId, planId }: { groupId: string; planId: string }) {
  const repair = useMutation({
    mutationFn: () =>
      startRun(groupId, 'runner.environment-drift-repair', { runner_group_uuid: groupId, plan_uuid: planId }),
    onSuccess: navigate,
  });
  return (
    <div>
      <p className="warning">Repairing changes real infrastructure to match the runner group.</p>
      <button type="button" disabled={repair.isPending} onClick={() => repair.mutate()}>
        Repair this plan
      </button>
      <Alert message={repair.isError ? repair.error.message : null} />
    </div>
  );
}
