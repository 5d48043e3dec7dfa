// Create (on /runners) or edit (on a group's page) a runner group; its environment is JSON,
// checked here against the same schema the API validates it with.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { runnerEnvironmentSchema } from '../../../../shared/runner-contracts';
import { api, ok } from '../../api/client';
import { Alert } from '../../components/Alert';
import { navigate } from '../../router';
import type { Connection, Group } from './data';

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

/** Create (no group) or edit (a group) a runner group; the environment is edited as JSON. */
export function GroupForm({ connections, group }: { connections: Connection[]; group?: Group }) {
  const qc = useQueryClient();
  const [name, setName] = useState(group?.name ?? '');
  const [connection, setConnection] = useState(group?.cloud_connection_uuid ?? '');
  const [env, setEnv] = useState(JSON.stringify(group?.environment ?? TEMPLATES.aws_ecs, null, 2));
  const [problem, setProblem] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: async () => {
      let json: unknown;
      try {
        json = JSON.parse(env);
      } catch {
        throw new Error('The environment is not valid JSON.');
      }
      const environment = runnerEnvironmentSchema.safeParse(json);
      if (!environment.success) {
        const issue = environment.error.issues[0];
        throw new Error(
          `The environment: ${issue?.path.join('.') || 'it'} ${issue?.message ?? 'is not valid'}.`,
        );
      }
      const body = {
        name: name.trim(),
        ...(connection ? { cloud_connection_uuid: connection } : {}),
        environment: environment.data,
      };
      return group
        ? ok(
            api.PUT('/api/v1/runner-groups/{id}', {
              params: { path: { id: group.runner_group_uuid } },
              body,
            }),
          )
        : ok(api.POST('/api/v1/runner-groups', { body }));
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
