// The request wizard (seed 001): a session's first request — repository URL (checked as the person
// types, by the API's own schema), cloud, scope id, optional IaC path, the request text — for
// Partial or Full drift remediation. Both modes are shown disabled below devops with the seed's
// hint. The authorization preflight runs before the request is sent; a denial is shown with its reason.
import { useState, type FormEvent } from 'react';
import { CLOUDS } from '../../../shared/drift-exceptions';
import { repositoryUrlSchema } from '../../../shared/contracts';
import { api, errorMessage, type Me } from '../api/client';
import { navigate } from '../router';

const DEVOPS_HINT = 'Requires the devops operation role.';

export function RequestPage({ me }: { me: Me }) {
  const canDrift = me.role === 'devops' || me.role === 'admin';
  const [mode, setMode] = useState<'partial' | 'full'>('partial');
  const [repositoryUrl, setRepositoryUrl] = useState('');
  const [cloud, setCloud] = useState<(typeof CLOUDS)[number]>('aws');
  const [scopeId, setScopeId] = useState('');
  const [iacPath, setIacPath] = useState('');
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const urlCheck = repositoryUrl ? repositoryUrlSchema.safeParse(repositoryUrl) : undefined;
  const urlProblem = urlCheck && !urlCheck.success ? urlCheck.error.issues[0]?.message : undefined;
  const ready = canDrift && urlCheck?.success === true && scopeId.trim() !== '' && text.trim() !== '';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const pre = await api.POST('/api/v1/auth/authorize', {
        body: { cloud, repository_url: repositoryUrl, ...(iacPath ? { iac_path: iacPath } : {}) } as never,
      });
      if (pre.response.status !== 200) {
        const body = (pre.data ?? pre.error) as { reason?: string } | undefined;
        setError(
          body?.reason ? `Not authorized: ${body.reason}` : errorMessage(pre.error, 'Not authorized.'),
        );
        return;
      }
      const body = {
        repository_url: repositoryUrl,
        cloud,
        scope_id: scopeId,
        text,
        ...(iacPath ? { iac_path: iacPath } : {}),
      };
      const res =
        mode === 'partial'
          ? await api.POST('/api/v1/drift/partial', { body })
          : await api.POST('/api/v1/drift/full', { body });
      if (res.response.status !== 202 || !res.data) {
        setError(errorMessage(res.error, `The request was not accepted (HTTP ${res.response.status}).`));
        return;
      }
      navigate(`/sessions/${(res.data as { session_id: string }).session_id}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="request-title">
      <h1 id="request-title">New drift request</h1>
      <form className="wizard" onSubmit={(e) => void submit(e)}>
        <fieldset>
          <legend>Mode</legend>
          {(['partial', 'full'] as const).map((m) => (
            <label key={m} className={canDrift ? '' : 'disabled'} title={canDrift ? undefined : DEVOPS_HINT}>
              <input
                type="radio"
                name="mode"
                value={m}
                checked={mode === m}
                disabled={!canDrift}
                onChange={() => setMode(m)}
                aria-describedby={canDrift ? undefined : 'mode-hint'}
              />
              {m === 'partial' ? 'Partial Drift Remediation' : 'Full Drift Remediation'}
            </label>
          ))}
          {!canDrift && (
            <p id="mode-hint" className="hint">
              {DEVOPS_HINT}
            </p>
          )}
        </fieldset>
        <label htmlFor="repository_url">Repository URL</label>
        <input
          id="repository_url"
          value={repositoryUrl}
          onChange={(e) => setRepositoryUrl(e.target.value)}
          placeholder="https://…/infra.git"
          aria-invalid={urlProblem ? true : undefined}
          aria-describedby="repository_url-problem"
        />
        <p id="repository_url-problem" className="error" aria-live="polite">
          {urlProblem ? `Repository URL ${urlProblem}.` : ''}
        </p>
        <label htmlFor="cloud">Cloud</label>
        <select
          id="cloud"
          value={cloud}
          onChange={(e) => setCloud(e.target.value as (typeof CLOUDS)[number])}
        >
          {CLOUDS.map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
        <label htmlFor="scope_id">Scope id</label>
        <input
          id="scope_id"
          value={scopeId}
          onChange={(e) => setScopeId(e.target.value)}
          placeholder="account, subscription or project id"
        />
        <label htmlFor="iac_path">IaC path (optional)</label>
        <input
          id="iac_path"
          value={iacPath}
          onChange={(e) => setIacPath(e.target.value)}
          placeholder="envs/prod"
        />
        <label htmlFor="text">Request</label>
        <textarea
          id="text"
          rows={3}
          value={text}
          onChange={(e) => setText(e.target.value)}
          placeholder="Resolve the drift on security group sg-web-demo."
        />
        <button type="submit" disabled={!ready || busy}>
          {busy ? 'Sending…' : 'Send request'}
        </button>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </section>
  );
}
