// The admin panel (admin role): the organization's users — create one with a role and see its token
// once, change a role, revoke or reissue a token —, the session locks (set with a reason, clear),
// and every session of the organization, each opening its page with its artifacts.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, ok, type Me } from '../api/client';
import { Link } from '../components/Link';
import { QueryState } from '../components/QueryState';
import { Alert } from '../components/Alert';

type Role = Me['role'];
const ROLES: Role[] = ['developer', 'devops', 'admin'];

export function AdminPage({ me }: { me: Me }) {
  if (me.role !== 'admin')
    return (
      <p role="alert" className="error">
        The admin panel is for admins.
      </p>
    );
  return (
    <section aria-labelledby="admin-title">
      <h1 id="admin-title">Admin</h1>
      <Users me={me} />
      <Locks />
      <AllSessions />
    </section>
  );
}

function Users({ me }: { me: Me }) {
  const qc = useQueryClient();
  const users = useQuery({
    queryKey: ['admin', 'users'],
    queryFn: async () => (await ok(api.GET('/api/v1/admin/users'))).users,
  });
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const [shown, setShown] = useState<{ name: string; token: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const done = () => void qc.invalidateQueries({ queryKey: ['admin', 'users'] });
  const act = useMutation({
    mutationFn: async (
      a:
        | { kind: 'create'; name: string; role: Role }
        | { kind: 'role'; id: string; role: Role }
        | { kind: 'revoke'; id: string }
        | { kind: 'reissue'; id: string; name: string },
    ) => {
      setError(null);
      if (a.kind === 'create') {
        const r = await ok(api.POST('/api/v1/admin/users', { body: { name: a.name, role: a.role } }));
        setShown({ name: a.name, token: r.token });
        setName('');
      } else if (a.kind === 'role') {
        await ok(
          api.PATCH('/api/v1/admin/users/{id}', { params: { path: { id: a.id } }, body: { role: a.role } }),
        );
      } else if (a.kind === 'revoke') {
        await ok(api.DELETE('/api/v1/admin/users/{id}/token', { params: { path: { id: a.id } } }));
      } else {
        const r = await ok(api.POST('/api/v1/admin/users/{id}/token', { params: { path: { id: a.id } } }));
        setShown({ name: a.name, token: r.token });
      }
    },
    onError: (e) => setError(e.message),
    onSettled: done,
  });
  const create = (e: FormEvent) => {
    e.preventDefault();
    act.mutate({ kind: 'create', name: name.trim(), role });
  };

  return (
    <section aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <form className="inline-form" onSubmit={create} aria-label="New user">
        <label htmlFor="new-user-name">Name</label>
        <input id="new-user-name" value={name} onChange={(e) => setName(e.target.value)} maxLength={100} />
        <label htmlFor="new-user-role">Role</label>
        <select id="new-user-role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        <button type="submit" disabled={name.trim() === '' || act.isPending}>
          Create user
        </button>
      </form>
      {shown && (
        <div className="token-once" role="status" aria-live="polite">
          <p>
            Token for <strong>{shown.name}</strong> — copy it now, it is not shown again:
          </p>
          <code data-testid="new-token">{shown.token}</code>{' '}
          <button type="button" onClick={() => setShown(null)}>
            Done
          </button>
        </div>
      )}
      <Alert message={error} />
      <QueryState query={users} loading="Loading the users…">
        {(data) => (
          <table aria-label="Users">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Token</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.map((u) => {
                const self = u.name === me.name;
                return (
                  <tr key={u.user_uuid} data-user={u.name}>
                    <td>{u.name}</td>
                    <td>
                      <select
                        aria-label={`Role of ${u.name}`}
                        value={u.role}
                        disabled={self || act.isPending}
                        onChange={(e) =>
                          act.mutate({ kind: 'role', id: u.user_uuid, role: e.target.value as Role })
                        }
                      >
                        {ROLES.map((r) => (
                          <option key={r}>{r}</option>
                        ))}
                      </select>
                    </td>
                    <td>{u.revoked_at ? 'Revoked' : 'Active'}</td>
                    <td>
                      {self ? (
                        <span className="hint">You</span>
                      ) : (
                        <>
                          {!u.revoked_at && (
                            <button
                              type="button"
                              disabled={act.isPending}
                              onClick={() => act.mutate({ kind: 'revoke', id: u.user_uuid })}
                            >
                              Revoke token
                            </button>
                          )}{' '}
                          <button
                            type="button"
                            disabled={act.isPending}
                            onClick={() => act.mutate({ kind: 'reissue', id: u.user_uuid, name: u.name })}
                          >
                            Issue new token
                          </button>
                        </>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </QueryState>
    </section>
  );
}

function Locks() {
  const qc = useQueryClient();
  const locks = useQuery({
    queryKey: ['admin', 'locks'],
    queryFn: async () => (await ok(api.GET('/api/v1/admin/locks'))).locks,
  });
  const [sessionId, setSessionId] = useState('');
  const [reason, setReason] = useState('');
  const [error, setError] = useState<string | null>(null);
  const act = useMutation({
    mutationFn: async (a: { kind: 'set'; id: string; reason: string } | { kind: 'clear'; id: string }) => {
      setError(null);
      const params = { params: { path: { id: a.id } } };
      if (a.kind === 'set')
        await ok(api.PUT('/api/v1/admin/sessions/{id}/lock', { ...params, body: { reason: a.reason } }));
      else await ok(api.DELETE('/api/v1/admin/sessions/{id}/lock', params));
      setReason('');
    },
    onError: (e) => setError(e.message),
    onSettled: () => void qc.invalidateQueries({ queryKey: ['admin'] }),
  });
  return (
    <section aria-labelledby="locks-title">
      <h2 id="locks-title">Session locks</h2>
      <form
        className="inline-form"
        aria-label="Lock a session"
        onSubmit={(e) => {
          e.preventDefault();
          act.mutate({ kind: 'set', id: sessionId.trim(), reason: reason.trim() });
        }}
      >
        <label htmlFor="lock-session">Session id</label>
        <input id="lock-session" value={sessionId} onChange={(e) => setSessionId(e.target.value)} />
        <label htmlFor="lock-reason">Reason</label>
        <input id="lock-reason" value={reason} maxLength={500} onChange={(e) => setReason(e.target.value)} />
        <button type="submit" disabled={sessionId.trim() === '' || act.isPending}>
          Lock session
        </button>
      </form>
      <Alert message={error} />
      <QueryState query={locks} loading="Loading the locks…" empty="No session is locked.">
        {(data) => (
          <table aria-label="Locks">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Reason</th>
                <th scope="col">Since</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.map((l) => (
                <tr key={l.session_id} data-lock={l.session_id}>
                  <td>
                    <Link to={`/sessions/${l.session_id}`}>{l.session_id}</Link>
                  </td>
                  <td>{l.reason || '—'}</td>
                  <td>{new Date(l.locked_at).toLocaleString()}</td>
                  <td>
                    <button
                      type="button"
                      disabled={act.isPending}
                      onClick={() => act.mutate({ kind: 'clear', id: l.session_id })}
                    >
                      Clear lock
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
    </section>
  );
}

function AllSessions() {
  const sessions = useQuery({
    queryKey: ['admin', 'sessions'],
    queryFn: async () => (await ok(api.GET('/api/v1/admin/sessions'))).sessions,
  });
  return (
    <section aria-labelledby="all-sessions-title">
      <h2 id="all-sessions-title">All sessions of the organization</h2>
      <QueryState query={sessions} loading="Loading the sessions…" empty="No session yet.">
        {(data) => (
          <table aria-label="All sessions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Repository</th>
                <th scope="col">Cloud</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.map((s) => (
                <tr key={s.session_id}>
                  <td>
                    <Link to={`/sessions/${s.session_id}`}>{s.session_id}</Link>
                  </td>
                  <td>
                    {s.repository_url}
                    {s.iac_path ? ` · ${s.iac_path}` : ''}
                  </td>
                  <td>{s.cloud}</td>
                  <td>{s.in_flight ? `${s.status} · ${s.in_flight.kind} running` : s.status}</td>
                  <td>{new Date(s.created_at).toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
    </section>
  );
}
