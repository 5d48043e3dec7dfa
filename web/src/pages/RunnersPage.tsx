// Runner groups (seed 002): the organization's cloud connections and runner groups (list, create,
// edit), a drift detection started on a group (auto-apply for devops only, off by default, with a
// warning that it changes infrastructure), each execution's live status, its plan
// (actions_needed, blocked_resources, drift_summary) and the repair run it chained.
//   /runners                          connections and groups
//   /runners/<group>                  a group: its environment, detection, executions
//   /runners/<group>/runs/<workflow>  one execution, live
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import type {
  BlockedResource,
  DriftSummary,
  PlannedAction,
  RunnerDagState,
} from '../../../shared/runner-contracts';
import { api, ok, type Me } from '../api/client';
import { Link } from '../components/Link';
import { QueryState } from '../components/QueryState';
import { navigate } from '../router';
import { Alert } from '../components/Alert';

interface Connection {
  cloud_connection_uuid: string;
  name: string;
  provider: 'aws' | 'gcp';
  region: string;
  project_id?: string | null;
  account_id?: string | null;
}
interface Group {
  runner_group_uuid: string;
  name: string;
  cloud_connection_uuid?: string | null;
  environment: { backend_type: string } & Record<string, unknown>;
}
interface Execution {
  runner_execution_uuid: string;
  workflow_type: string;
  workflow_uuid: string;
  status: string;
  outcome: string | null;
  retry_count: number;
  created_at: string;
}
interface Run {
  workflow_uuid: string;
  workflow_type: string;
  status: string;
  started_at: string;
  closed_at: string | null;
  output: (RunnerDagState & { repair_workflow_id?: string }) | null;
}

/** Environment templates a new group starts from, by backend (edited as JSON). */
const TEMPLATES: Record<string, unknown> = {
  aws_ecs: {
    backend_type: 'aws_ecs',
    ecs_cluster: { name: 'runners', container_insights: 'disabled' },
    log_group: { name: '/kumoss/runners', retention_days: 30 },
    task_definition: { family: 'runner', image: 'ghcr.io/example/runner:1', cpu: '256', memory: '512' },
  },
  gce: {
    backend_type: 'gce',
    service_account: { account_id: 'runner-sa', display_name: 'Runners' },
    instance_template: { name: 'runner-template', machine_type: 'e2-medium', source_image: 'debian-12' },
  },
  cloud_run: {
    backend_type: 'cloud_run',
    service_account: { account_id: 'runner-sa', display_name: 'Runners' },
    cloud_run_job: { name: 'runner-job', image: 'us-docker.pkg.dev/example/runner:1' },
  },
};

export function RunnersPage({ me, path }: { me: Me; path: string }) {
  const run = /^\/runners\/([0-9a-f-]{36})\/runs\/([A-Za-z0-9._-]+)$/.exec(path);
  if (run?.[1] && run[2]) return <RunView groupId={run[1]} workflowId={run[2]} me={me} />;
  const group = /^\/runners\/([0-9a-f-]{36})$/.exec(path);
  if (group?.[1]) return <GroupView groupId={group[1]} me={me} />;
  return <Overview me={me} />;
}

function useConnections() {
  return useQuery({
    queryKey: ['runners', 'connections'],
    queryFn: async () =>
      (await ok<{ cloud_connections: Connection[] }>(api.GET('/api/v1/cloud-connections'))).cloud_connections,
  });
}

function Overview({ me }: { me: Me }) {
  const canEdit = me.role !== 'developer';
  const connections = useConnections();
  const groups = useQuery({
    queryKey: ['runners', 'groups'],
    queryFn: async () =>
      (await ok<{ runner_groups: Group[] }>(api.GET('/api/v1/runner-groups'))).runner_groups,
  });
  return (
    <section aria-labelledby="runners-title">
      <h1 id="runners-title">Runner groups</h1>
      <h2>Runner groups</h2>
      <QueryState query={groups} loading="Loading the runner groups…" empty="No runner group yet.">
        {(data) => (
          <table aria-label="Runner groups">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Backend</th>
                <th scope="col">Cloud connection</th>
              </tr>
            </thead>
            <tbody>
              {data.map((g) => (
                <tr key={g.runner_group_uuid} data-group={g.name}>
                  <td>
                    <Link to={`/runners/${g.runner_group_uuid}`}>{g.name}</Link>
                  </td>
                  <td>{g.environment.backend_type}</td>
                  <td>
                    {connections.data?.find((c) => c.cloud_connection_uuid === g.cloud_connection_uuid)
                      ?.name ?? '—'}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
      {canEdit && <GroupForm connections={connections.data ?? []} />}
      <h2>Cloud connections</h2>
      <QueryState
        query={connections}
        loading="Loading the cloud connections…"
        empty="No cloud connection yet."
      >
        {(data) => (
          <table aria-label="Cloud connections">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Provider</th>
                <th scope="col">Region</th>
                <th scope="col">Project / account</th>
              </tr>
            </thead>
            <tbody>
              {data.map((c) => (
                <tr key={c.cloud_connection_uuid}>
                  <td>{c.name}</td>
                  <td>{c.provider}</td>
                  <td>{c.region}</td>
                  <td>{c.project_id ?? c.account_id ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
      {canEdit && <ConnectionForm />}
    </section>
  );
}

function ConnectionForm() {
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [provider, setProvider] = useState<'aws' | 'gcp'>('aws');
  const [region, setRegion] = useState('');
  const [project, setProject] = useState('');
  const create = useMutation({
    mutationFn: () =>
      ok(
        api.POST('/api/v1/cloud-connections', {
          body: {
            name: name.trim(),
            provider,
            region: region.trim(),
            ...(project.trim()
              ? provider === 'gcp'
                ? { project_id: project.trim() }
                : { account_id: project.trim() }
              : {}),
          },
        }),
      ),
    onSuccess: () => {
      setName('');
      setRegion('');
      setProject('');
      void qc.invalidateQueries({ queryKey: ['runners'] });
    },
  });
  return (
    <form
      className="inline-form"
      aria-label="New cloud connection"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <label htmlFor="conn-name">Name</label>
      <input id="conn-name" value={name} onChange={(e) => setName(e.target.value)} />
      <label htmlFor="conn-provider">Provider</label>
      <select
        id="conn-provider"
        value={provider}
        onChange={(e) => setProvider(e.target.value as 'aws' | 'gcp')}
      >
        <option>aws</option>
        <option>gcp</option>
      </select>
      <label htmlFor="conn-region">Region</label>
      <input
        id="conn-region"
        value={region}
        placeholder="us-east-1"
        onChange={(e) => setRegion(e.target.value)}
      />
      <label htmlFor="conn-project">{provider === 'gcp' ? 'Project id' : 'Account id (optional)'}</label>
      <input id="conn-project" value={project} onChange={(e) => setProject(e.target.value)} />
      <button type="submit" disabled={create.isPending || !name.trim() || !region.trim()}>
        Add connection
      </button>
      <Alert message={create.isError ? create.error.message : null} />
    </form>
  );
}

/** Create (no group) or edit (a group) a runner group; the environment is edited as JSON. */
function GroupForm({ connections, group }: { connections: Connection[]; group?: Group }) {
  const qc = useQueryClient();
  const [name, setName] = useState(group?.name ?? '');
  const [connection, setConnection] = useState(group?.cloud_connection_uuid ?? '');
  const [env, setEnv] = useState(JSON.stringify(group?.environment ?? TEMPLATES.aws_ecs, null, 2));
  const [problem, setProblem] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: async () => {
      let environment: unknown;
      try {
        environment = JSON.parse(env);
      } catch {
        throw new Error('The environment is not valid JSON.');
      }
      const body = {
        name: name.trim(),
        ...(connection ? { cloud_connection_uuid: connection } : {}),
        environment,
      } as never;
      return group
        ? ok<Group>(
            api.PUT('/api/v1/runner-groups/{id}', {
              params: { path: { id: group.runner_group_uuid } },
              body,
            }),
          )
        : ok<Group>(api.POST('/api/v1/runner-groups', { body }));
    },
    onMutate: () => setProblem(null),
    onError: (e) => setProblem(e.message),
    onSuccess: (g) => {
      void qc.invalidateQueries({ queryKey: ['runners'] });
      if (!group) navigate(`/runners/${g.runner_group_uuid}`);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  const id = group ? 'edit-group' : 'new-group';
  return (
    <form className="wizard" aria-label={group ? 'Edit runner group' : 'New runner group'} onSubmit={submit}>
      <h3>{group ? 'Edit the runner group' : 'New runner group'}</h3>
      <label htmlFor={`${id}-name`}>Name</label>
      <input id={`${id}-name`} value={name} onChange={(e) => setName(e.target.value)} />
      <label htmlFor={`${id}-connection`}>Cloud connection</label>
      <select id={`${id}-connection`} value={connection} onChange={(e) => setConnection(e.target.value)}>
        <option value="">None</option>
        {connections.map((c) => (
          <option key={c.cloud_connection_uuid} value={c.cloud_connection_uuid}>
            {c.name} ({c.provider} {c.region})
          </option>
        ))}
      </select>
      {!group && (
        <>
          <label htmlFor={`${id}-template`}>Start from the template for</label>
          <select
            id={`${id}-template`}
            onChange={(e) => setEnv(JSON.stringify(TEMPLATES[e.target.value], null, 2))}
            defaultValue="aws_ecs"
          >
            {Object.keys(TEMPLATES).map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </>
      )}
      <label htmlFor={`${id}-environment`}>Environment (JSON)</label>
      <textarea
        id={`${id}-environment`}
        className="mono"
        rows={12}
        value={env}
        onChange={(e) => setEnv(e.target.value)}
        spellCheck={false}
      />
      <button type="submit" disabled={save.isPending || !name.trim()}>
        {group ? 'Save changes' : 'Create runner group'}
      </button>
      {save.isSuccess && group && <p role="status">Saved.</p>}
      <Alert message={problem} />
    </form>
  );
}

function GroupView({ groupId, me }: { groupId: string; me: Me }) {
  const canEdit = me.role !== 'developer';
  const connections = useConnections();
  const group = useQuery({
    queryKey: ['runners', 'group', groupId],
    queryFn: () => ok<Group>(api.GET('/api/v1/runner-groups/{id}', { params: { path: { id: groupId } } })),
  });
  const executions = useQuery({
    queryKey: ['runners', 'executions', groupId],
    refetchInterval: (q) => (q.state.data?.some((e) => e.status === 'running') ? 2000 : false),
    queryFn: async () =>
      (
        await ok<{ executions: Execution[] }>(
          api.GET('/api/v1/runner-groups/{id}/executions', { params: { path: { id: groupId } } }),
        )
      ).executions,
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
  const startRun = useMutation({
    mutationFn: () =>
      ok<{ workflow_uuid: string }>(
        api.POST('/api/workflows/start', {
          body: {
            workflow_type: 'runner.environment-drift-detect',
            initial_data: { runner_group_uuid: group.runner_group_uuid, auto_apply: canApply && autoApply },
          },
        }),
      ),
    onSuccess: (r) => navigate(`/runners/${group.runner_group_uuid}/runs/${r.workflow_uuid}`),
  });
  return (
    <form
      className="wizard"
      aria-label="Drift detection"
      onSubmit={(e) => {
        e.preventDefault();
        startRun.mutate();
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
      <button type="submit" disabled={startRun.isPending}>
        {autoApply ? 'Detect drift and repair it' : 'Detect drift'}
      </button>
      <Alert message={startRun.isError ? startRun.error.message : null} />
    </form>
  );
}

function RunView({ groupId, workflowId, me }: { groupId: string; workflowId: string; me: Me }) {
  const run = useQuery({
    queryKey: ['runners', 'run', workflowId],
    // Live while it runs: the run's state every second (a DAG's steps take seconds).
    refetchInterval: (q) => (q.state.data?.status === 'RUNNING' ? 1000 : false),
    queryFn: () =>
      ok<Run>(api.GET('/api/workflows/{workflow_uuid}', { params: { path: { workflow_uuid: workflowId } } })),
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

function Summary({ summary }: { summary: DriftSummary }) {
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

function Actions({ actions }: { actions: PlannedAction[] }) {
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

function Blocked({ blocked }: { blocked: BlockedResource[] }) {
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
      ok<{ workflow_uuid: string }>(
        api.POST('/api/workflows/start', {
          body: {
            workflow_type: 'runner.environment-drift-repair',
            initial_data: { runner_group_uuid: groupId, plan_uuid: planId },
          },
        }),
      ),
    onSuccess: (r) => navigate(`/runners/${groupId}/runs/${r.workflow_uuid}`),
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
