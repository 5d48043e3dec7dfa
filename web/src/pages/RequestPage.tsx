// The request wizard (seed 001): a session's first request — repository URL (checked as the person
// types, by the API's own schema), cloud, scope id, optional IaC path, the request text — for
// Partial or Full drift remediation, or Generate (a change whose plan is pinned for review and
// apply). Every mode is shown disabled below devops with the seed's hint. When the mapping sidecar knows the repository's cloud and scope, those two questions are
// skipped (null = ask). The authorization preflight runs before the request is sent; a denial is
// shown with its reason. `/new?repository_url=…&cloud=…&scope_id=…&iac_path=…` opens it prefilled
// (a failed session offers that link to its replacement).
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { CLOUDS } from '../../../shared/drift-exceptions';
import { repositoryUrlSchema } from '../../../shared/contracts';
import { api, errorMessage, type Me } from '../api/client';
import { ModeChoice, MODE_ROUTES, type DriftMode } from '../components/ModeChoice';
import { navigate } from '../router';
import { Alert } from '../components/Alert';

type Cloud = (typeof CLOUDS)[number];

function prefill(): { repositoryUrl: string; cloud: Cloud; scopeId: string; iacPath: string } {
  const q = new URLSearchParams(window.location.search);
  const cloud = q.get('cloud') ?? '';
  return {
    repositoryUrl: q.get('repository_url') ?? '',
    cloud: (CLOUDS as readonly string[]).includes(cloud) ? (cloud as Cloud) : 'aws',
    scopeId: q.get('scope_id') ?? '',
    iacPath: q.get('iac_path') ?? '',
  };
}

/** The mapping sidecar's answer for a valid URL: provider and scope, each null when unsure. */
function useMapping(repositoryUrl: string, iacPath: string, valid: boolean) {
  return useQuery({
    queryKey: ['mapping', repositoryUrl, iacPath],
    enabled: valid,
    retry: false,
    staleTime: 60_000,
    queryFn: async (): Promise<{ provider: Cloud | null; scope_id: string | null }> => {
      const { data, response } = await api.POST('/api/v1/mapping', {
        body: { repository_url: repositoryUrl, ...(iacPath ? { iac_path: iacPath } : {}) },
      });
      // The sidecar down or the question refused: ask the person.
      if (response.status !== 200 || !data) return { provider: null, scope_id: null };
      return data;
    },
  });
}

export function RequestPage({ me }: { me: Me }) {
  const canDrift = me.role === 'devops' || me.role === 'admin';
  const [initial] = useState(prefill);
  const [mode, setMode] = useState<DriftMode>('partial');
  const [repositoryUrl, setRepositoryUrl] = useState(initial.repositoryUrl);
  const [chosenCloud, setCloud] = useState<Cloud>(initial.cloud);
  const [chosenScope, setScopeId] = useState(initial.scopeId);
  const [iacPath, setIacPath] = useState(initial.iacPath);
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const urlCheck = repositoryUrl ? repositoryUrlSchema.safeParse(repositoryUrl) : undefined;
  const urlProblem = urlCheck && !urlCheck.success ? urlCheck.error.issues[0]?.message : undefined;
  const mapping = useMapping(repositoryUrl, iacPath, urlCheck?.success === true).data;
  const mappedCloud = mapping?.provider ?? null;
  const mappedScope = mapping?.scope_id ?? null;
  const cloud = mappedCloud ?? chosenCloud;
  const scopeId = mappedScope ?? chosenScope;
  const ready = canDrift && urlCheck?.success === true && scopeId.trim() !== '' && text.trim() !== '';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const pre = await api.POST('/api/v1/auth/authorize', {
        body: { cloud, repository_url: repositoryUrl, ...(iacPath ? { iac_path: iacPath } : {}) },
      });
      if (pre.response.status !== 200) {
        // A 403 is the sidecar's answer (with its reason) or an error body.
        const reason = pre.error && 'reason' in pre.error ? pre.error.reason : undefined;
        setError(reason ? `Not authorized: ${reason}` : errorMessage(pre.error, 'Not authorized.'));
        return;
      }
      const body = {
        repository_url: repositoryUrl,
        cloud,
        scope_id: scopeId,
        text,
        ...(iacPath ? { iac_path: iacPath } : {}),
      };
      const res = await api.POST(MODE_ROUTES[mode], { body });
      if (res.response.status !== 202 || !res.data) {
        setError(errorMessage(res.error, `The request was not accepted (HTTP ${res.response.status}).`));
        return;
      }
      navigate(`/sessions/${res.data.session_id}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="request-title">
      <h1 id="request-title">New drift request</h1>
      <form className="wizard" onSubmit={(e) => void submit(e)}>
        <ModeChoice name="mode" mode={mode} onChange={setMode} enabled={canDrift} />
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
        <label htmlFor="iac_path">IaC path (optional)</label>
        <input
          id="iac_path"
          value={iacPath}
          onChange={(e) => setIacPath(e.target.value)}
          placeholder="envs/prod"
        />
        {mappedCloud ? (
          <p data-testid="mapped-cloud">
            Cloud: <strong>{mappedCloud}</strong> <span className="hint">(known for this repository)</span>
          </p>
        ) : (
          <>
            <label htmlFor="cloud">Cloud</label>
            <select id="cloud" value={chosenCloud} onChange={(e) => setCloud(e.target.value as Cloud)}>
              {CLOUDS.map((c) => (
                <option key={c} value={c}>
                  {c}
                </option>
              ))}
            </select>
          </>
        )}
        {mappedScope ? (
          <p data-testid="mapped-scope">
            Scope id: <strong>{mappedScope}</strong> <span className="hint">(known for this repository)</span>
          </p>
        ) : (
          <>
            <label htmlFor="scope_id">Scope id</label>
            <input
              id="scope_id"
              value={chosenScope}
              onChange={(e) => setScopeId(e.target.value)}
              placeholder="account, subscription or project id"
            />
          </>
        )}
        <label htmlFor="text">Request</label>
        <textarea
          id="text"
          rows={3}
          value={text}
          onChange={(e) => setText(e.target.value)}
          placeholder={
            mode === 'generate'
              ? 'Add the tag CostCenter = cc-1234 to the bastion security group.'
              : 'Resolve the drift on security group sg-web-demo.'
          }
        />
        <button type="submit" disabled={!ready || busy}>
          {busy ? 'Sending…' : 'Send request'}
        </button>
        <Alert message={error} />
      </form>
    </section>
  );
}
