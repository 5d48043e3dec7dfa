// /runners: the organization's runner groups and cloud connections, with the forms that add them.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, ok, type Me } from '../../api/client';
import { Alert } from '../../components/Alert';
import { Link } from '../../components/Link';
import { QueryState } from '../../components/QueryState';
import { GroupForm } from './GroupForm';
import { useConnections } from './data';

export function Overview({ me }: { me: Me }) {
  const canEdit = me.role !== 'developer';
  const connections = useConnections();
  const groups = useQuery({
    queryKey: ['runners', 'groups'],
    queryFn: async () => (await ok(api.GET('/api/v1/runner-groups'))).runner_groups,
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
