// My sessions: the organization's sessions, newest first, a page at a time, with status and outcome.
import { useInfiniteQuery } from '@tanstack/react-query';
import { api, errorMessage } from '../api/client';
import { navigate } from '../router';

export function SessionsPage() {
  const sessions = useInfiniteQuery({
    queryKey: ['sessions'],
    initialPageParam: undefined as string | undefined,
    queryFn: async ({ pageParam }) => {
      const { data, error } = await api.GET('/api/v1/sessions', {
        params: { query: { limit: 25, ...(pageParam ? { before: pageParam } : {}) } },
      });
      if (error || !data) throw new Error(errorMessage(error));
      return data;
    },
    getNextPageParam: (last) => last.next ?? undefined,
  });

  if (sessions.isPending) return <p role="status">Loading sessions…</p>;
  if (sessions.isError)
    return (
      <p role="alert" className="error">
        {sessions.error.message}
      </p>
    );
  const rows = sessions.data.pages.flatMap((p) => p.sessions);
  return (
    <section aria-labelledby="sessions-title">
      <h1 id="sessions-title">Sessions</h1>
      {rows.length === 0 ? (
        <p className="empty">No session yet. Start one with a drift request.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Repository</th>
              <th scope="col">Path</th>
              <th scope="col">Cloud</th>
              <th scope="col">Status</th>
              <th scope="col">Last outcome</th>
              <th scope="col">Started</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => (
              <tr key={s.session_id} data-session={s.session_id}>
                <td>
                  <a
                    href={`/sessions/${s.session_id}`}
                    onClick={(e) => {
                      e.preventDefault();
                      navigate(`/sessions/${s.session_id}`);
                    }}
                  >
                    {s.repository_url}
                  </a>
                </td>
                <td>{s.iac_path || '—'}</td>
                <td>{s.cloud}</td>
                <td>
                  <span className={`status status-${s.status.toLowerCase()}`}>
                    {s.in_flight ? 'RUNNING' : s.status}
                  </span>
                </td>
                <td>{s.last_outcome ?? '—'}</td>
                <td>
                  <time dateTime={s.created_at}>{new Date(s.created_at).toLocaleString()}</time>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {sessions.hasNextPage && (
        <button
          type="button"
          onClick={() => void sessions.fetchNextPage()}
          disabled={sessions.isFetchingNextPage}
        >
          {sessions.isFetchingNextPage ? 'Loading…' : 'More sessions'}
        </button>
      )}
    </section>
  );
}
