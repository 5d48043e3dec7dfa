// The application shell: who is signed in (GET /api/v1/auth/me), sign-in when nobody is, the views.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api, type Me } from './api/client';
import { SessionsPage } from './pages/SessionsPage';
import { SignInPage } from './pages/SignInPage';
import { navigate, usePath } from './router';

export function App() {
  const path = usePath();
  const queryClient = useQueryClient();
  const me = useQuery({
    queryKey: ['me'],
    queryFn: async (): Promise<Me | null> => {
      const { data, response } = await api.GET('/api/v1/auth/me');
      if (response.status === 401) return null;
      return (data as { user: Me } | undefined)?.user ?? null;
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
        <span className="who" aria-label="Signed in as">
          {me.data.name} · {me.data.role}
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main>
        {path === '/' || path === '/sessions' ? (
          <SessionsPage />
        ) : (
          <p>
            Nothing here: <a href="/">back to the sessions</a>.
          </p>
        )}
      </main>
    </div>
  );
}
