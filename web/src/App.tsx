// The application shell: who is signed in (GET /api/v1/auth/me), sign-in when nobody is, the views.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Me } from './api/client';
import { RequestPage } from './pages/RequestPage';
import { SessionPage } from './pages/SessionPage';
import { SessionsPage } from './pages/SessionsPage';
import { SignInPage } from './pages/SignInPage';
import { navigate, usePath } from './router';

export function App() {
  const path = usePath();
  const queryClient = useQueryClient();
  const me = useQuery({
    queryKey: ['me'],
    queryFn: async (): Promise<(Me & { uiUrl: string }) | null> => {
      const { data, response } = await api.GET('/api/v1/auth/me');
      if (response.status === 401) return null;
      const body = data as { user: Me; temporal_ui_url?: string } | undefined;
      return body ? { ...body.user, uiUrl: body.temporal_ui_url ?? '' } : null;
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
        </nav>
        <span className="who" aria-label="Signed in as">
          {me.data.name} · {me.data.role}
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main>{view(path, me.data)}</main>
    </div>
  );
}

function Link({ to, children }: { to: string; children: string }) {
  return (
    <a
      href={to}
      onClick={(e) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

function view(path: string, me: Me & { uiUrl: string }) {
  const session = /^\/sessions\/([A-Za-z0-9._-]+)$/.exec(path);
  if (session?.[1]) return <SessionPage key={session[1]} sessionId={session[1]} uiUrl={me.uiUrl} />;
  if (path === '/new') return <RequestPage me={me} />;
  if (path === '/' || path === '/sessions') return <SessionsPage />;
  return (
    <p>
      Nothing here: <Link to="/">back to the sessions</Link>.
    </p>
  );
}
