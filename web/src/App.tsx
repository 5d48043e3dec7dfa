// The application shell: who is signed in (GET /api/v1/auth/me), sign-in when nobody is, the views.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Me } from './api/client';
import { ErrorBoundary } from './components/ErrorBoundary';
import { Link } from './components/Link';
import { AdminPage } from './pages/AdminPage';
import { RequestPage } from './pages/RequestPage';
import { RunnersPage } from './pages/RunnersPage';
import { SessionPage } from './pages/SessionPage';
import { SessionsPage } from './pages/SessionsPage';
import { SignInPage } from './pages/SignInPage';
import { InboxPage, StacksPage } from './pages/StacksPage';
import { navigate, usePath } from './router';

export function App() {
  const path = usePath();
  const queryClient = useQueryClient();
  const me = useQuery({
    queryKey: ['me'],
    queryFn: async (): Promise<(Me & { uiUrl: string }) | null> => {
      const { data, response } = await api.GET('/api/v1/auth/me');
      if (response.status === 401) return null;
      return data ? { ...data.user, uiUrl: data.temporal_ui_url } : null;
    },
  });

  if (me.isPending)
    return (
      <p className="loading" role="status">
        Loading…
      </p>
    );
  if (!me.data)
    return <SignInPage onSignedIn={() => void queryClient.invalidateQueries({ queryKey: ['me'] })} />;

  const signOut = async () => {
    await api.DELETE('/api/v1/auth/session');
    queryClient.clear();
    navigate('/');
    await queryClient.invalidateQueries({ queryKey: ['me'] });
  };

  return (
    <div className="shell">
      <header>
        <a
          href="/"
          className="brand"
          onClick={(e) => {
            e.preventDefault();
            navigate('/');
          }}
        >
          Kumoss
        </a>
        <nav aria-label="Main">
          <Link to="/">Sessions</Link>
          <Link to="/new">New request</Link>
          <Link to="/stacks">Stacks</Link>
          <Link to="/inbox">Drift inbox</Link>
          <Link to="/runners">Runner groups</Link>
          {me.data.role === 'admin' && <Link to="/admin">Admin</Link>}
        </nav>
        <span className="who" aria-label="Signed in as">
          {me.data.name} · {me.data.role}
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main>
        <ErrorBoundary key={path} what="page">
          {view(path, me.data)}
        </ErrorBoundary>
      </main>
    </div>
  );
}

function view(location: string, me: Me & { uiUrl: string }) {
  const [path = '/', search = ''] = location.split('?');
  const session = /^\/sessions\/([A-Za-z0-9._-]+)$/.exec(path);
  if (session?.[1]) return <SessionPage key={session[1]} sessionId={session[1]} uiUrl={me.uiUrl} me={me} />;
  if (path === '/new') return <RequestPage key={search} me={me} />;
  if (path === '/admin') return <AdminPage me={me} />;
  if (path === '/runners' || path.startsWith('/runners/')) return <RunnersPage me={me} path={path} />;
  if (path === '/stacks' || path.startsWith('/stacks/')) return <StacksPage key={path} me={me} path={path} />;
  if (path === '/inbox') return <InboxPage key={search} me={me} search={search} />;
  if (path === '/' || path === '/sessions') return <SessionsPage />;
  return (
    <p>
      Nothing here: <Link to="/">back to the sessions</Link>.
    </p>
  );
}
