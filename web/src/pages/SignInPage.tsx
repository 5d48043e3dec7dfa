// Sign in with the token `npx kumoss user add` printed: it is exchanged for an httpOnly session
// cookie and forgotten — the page never stores it, and script cannot read the cookie.
import { useState, type FormEvent } from 'react';
import { api, errorMessage } from '../api/client';
import { Alert } from '../components/Alert';

export function SignInPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const { error: failure, response } = await api.POST('/api/v1/auth/session', {
      body: { token },
    });
    setBusy(false);
    if (response.status === 201) {
      setToken('');
      onSignedIn();
    } else {
      setError(errorMessage(failure, `Sign-in failed (HTTP ${response.status}).`));
    }
  };

  return (
    <main className="sign-in">
      <h1>Kumoss</h1>
      <form onSubmit={(e) => void submit(e)}>
        <label htmlFor="token">Access token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          value={token}
          onChange={(e) => setToken(e.target.value)}
          placeholder="kms_…"
          required
        />
        <p className="hint">
          The token <code>npx kumoss user add</code> printed.
        </p>
        <button type="submit" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <Alert message={error} />
      </form>
    </main>
  );
}
