// A session: scope id, state project id, repository, path, status, lock, and its rounds with their
// live status, streamed from the session's event log over server-sent events (the browser resumes
// after a dropped connection with Last-Event-ID by itself), with a link to each run in the Temporal
// Web UI. Everything shown is text: nothing from a repository, a model or a report is ever markup.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useEffect, useState, type FormEvent } from 'react';
import { api, errorMessage, type Answer, type Me } from '../api/client';
import { DEVOPS_HINT, ModeChoice, MODE_ROUTES, type DriftMode } from '../components/ModeChoice';
import { navigate } from '../router';
import { Alert } from '../components/Alert';

// diff2html, highlight.js and the Markdown renderer load only with a session's artifacts.
const RoundArtifacts = lazy(() => import('../artifacts/Artifacts'));

// The session detail as the API's OpenAPI document describes it (shared/contracts.ts
// sessionDetailSchema; `npm run web:types`).
type Detail = Answer<'/api/v1/sessions/{id}', 'get'>;
type PinnedPlan = NonNullable<Detail['pinned_plan']>;

/** Live statuses by round, from the event stream. */
function useLiveStatuses(sessionId: string, onRoundEnd: () => void): Record<string, string> {
  const [statuses, setStatuses] = useState<Record<string, string>>({});
  useEffect(() => {
    const source = new EventSource(`/api/v1/events/subscribe/${encodeURIComponent(sessionId)}`);
    const onStatus = (e: MessageEvent<string>) => {
      const data = JSON.parse(e.data) as { round_id: string; status: string };
      setStatuses((s) => ({ ...s, [data.round_id]: data.status }));
    };
    const onEnd = (e: MessageEvent<string>) => {
      onStatus(e);
      onRoundEnd();
    };
    source.addEventListener('status', onStatus);
    source.addEventListener('round_end', onEnd);
    source.addEventListener('round', onRoundEnd);
    source.addEventListener('close', () => source.close());
    return () => source.close();
  }, [sessionId, onRoundEnd]);
  return statuses;
}

export function SessionPage({ sessionId, uiUrl, me }: { sessionId: string; uiUrl: string; me: Me }) {
  const queryClient = useQueryClient();
  const detail = useQuery({
    queryKey: ['session', sessionId],
    queryFn: async (): Promise<Detail> => {
      const { data, error } = await api.GET('/api/v1/sessions/{id}', { params: { path: { id: sessionId } } });
      if (error) throw new Error(errorMessage(error));
      return data;
    },
  });
  const [refresh] = useState(
    () => () => void queryClient.invalidateQueries({ queryKey: ['session', sessionId] }),
  );
  const live = useLiveStatuses(sessionId, refresh);

  if (detail.isPending) return <p role="status">Loading the session…</p>;
  if (detail.isError)
    return (
      <p role="alert" className="error">
        {detail.error.message}
      </p>
    );
  const d = detail.data;
  return (
    <section aria-labelledby="session-title">
      <h1 id="session-title">Session {d.session_id}</h1>
      <dl className="facts">
        <dt>Repository</dt>
        <dd>{d.repository_url}</dd>
        <dt>IaC path</dt>
        <dd>{d.iac_path || '—'}</dd>
        <dt>Cloud</dt>
        <dd>{d.cloud}</dd>
        <dt>Scope id</dt>
        <dd>{d.scope_id}</dd>
        <dt>State project id</dt>
        <dd>{d.state_project_id}</dd>
        <dt>Status</dt>
        <dd data-testid="session-status">{d.status}</dd>
        <dt>Lock</dt>
        <dd data-testid="session-lock">
          {d.locked ? `Locked${d.lock_reason ? `: ${d.lock_reason}` : ''}` : 'Not locked'}
        </dd>
        <dt>Branch</dt>
        <dd>{d.branch}</dd>
      </dl>
      {d.status === 'FAILED' && (
        <div className="error" role="alert">
          <p>This session failed and cannot be continued: it must be replaced by a new session.</p>
          <a
            href={replacement(d)}
            onClick={(e) => {
              e.preventDefault();
              navigate(replacement(d));
            }}
          >
            Start a new session for this repository
          </a>
        </div>
      )}
      {d.pinned_plan && <PinnedPlanPanel detail={d} plan={d.pinned_plan} onChange={refresh} />}
      <LeftoverDrift detail={d} me={me} onChange={refresh} />
      <Results detail={d} onChange={refresh} />
      <h2>Rounds</h2>
      <ol className="rounds">
        {d.rounds.map((r) => (
          <li key={r.round_id} data-round={r.round_id}>
            <p>
              <strong>{r.kind}</strong> ·{' '}
              <span data-testid="round-status">{live[r.round_id] ?? r.status}</span>
              {r.outcome ? ` · ${r.outcome}` : ''}
              {uiUrl && r.workflow_id && (
                <>
                  {' · '}
                  <a
                    href={`${uiUrl}/namespaces/default/workflows/${encodeURIComponent(r.workflow_id)}`}
                    target="_blank"
                    rel="noreferrer noopener"
                  >
                    run in the Temporal Web UI
                  </a>
                </>
              )}
            </p>
            {r.text && <p className="request">{r.text}</p>}
            {r.summary && <p>{r.summary}</p>}
            {(r.failure_reason ?? r.reason) && <p className="hint">{r.failure_reason ?? r.reason}</p>}
            <Suspense fallback={<p role="status">Loading the artifacts…</p>}>
              <RoundArtifacts
                prefix={`sessions/${d.session_id}/rounds/${r.round_id}/`}
                artifacts={d.artifacts.filter((a) =>
                  a.key.startsWith(`sessions/${d.session_id}/rounds/${r.round_id}/`),
                )}
              />
            </Suspense>
          </li>
        ))}
      </ol>
      {d.status === 'ACTIVE' && <FollowUp detail={d} me={me} onSent={refresh} />}
    </section>
  );
}

/**
 * The drift a session's latest drift round found, and "Revert in the cloud" on chosen addresses: a
 * generate round with no change to the code pins a plan of exactly those addresses (devops).
 */
function LeftoverDrift({ detail: d, me, onChange }: { detail: Detail; me: Me; onChange: () => void }) {
  const canRevert = me.role === 'devops' || me.role === 'admin';
  const lastDrift = [...d.rounds]
    .reverse()
    .find(
      (r) =>
        (r.kind === 'partial' || r.kind === 'full') &&
        (r.status === 'completed' || r.status === 'uncompleted'),
    );
  const revertable = useQuery({
    queryKey: ['revertable', d.session_id, lastDrift?.round_id],
    enabled: lastDrift !== undefined,
    queryFn: async () => {
      const { data, error } = await api.GET('/api/v1/sessions/{id}/revertable', {
        params: { path: { id: d.session_id } },
      });
      if (error) throw new Error(errorMessage(error));
      return data.addresses;
    },
  });
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const addresses = revertable.data ?? [];
  if (!lastDrift || addresses.length === 0) return null;
  const revert = async () => {
    setBusy(true);
    setError(null);
    const res = await api.POST('/api/v1/sessions/{id}/revert', {
      params: { path: { id: d.session_id } },
      body: { addresses: [...chosen] },
    });
    setBusy(false);
    if (res.response.status !== 202) setError(errorMessage(res.error, `HTTP ${res.response.status}`));
    else if (res.data?.accepted === false) setError(res.data.reason ?? 'The session refused the request.');
    else setChosen(new Set());
    onChange();
  };
  return (
    <section aria-labelledby="leftover-title">
      <h2 id="leftover-title">Drift found</h2>
      <p className="hint">
        Adopt it (a drift round: the code follows the cloud) or revert it: the cloud follows the code, with a
        plan of exactly the chosen addresses pinned for review.
      </p>
      <ul className="choices">
        {addresses.map((a) => (
          <li key={a}>
            <label>
              <input
                type="checkbox"
                disabled={!canRevert}
                checked={chosen.has(a)}
                onChange={() =>
                  setChosen((prev) => {
                    const next = new Set(prev);
                    if (next.has(a)) next.delete(a);
                    else next.add(a);
                    return next;
                  })
                }
              />
              <code>{a}</code>
            </label>
          </li>
        ))}
      </ul>
      <button
        type="button"
        disabled={!canRevert || busy || chosen.size === 0 || d.in_flight !== null || d.status !== 'ACTIVE'}
        aria-describedby={canRevert ? undefined : 'revert-hint'}
        onClick={() => void revert()}
      >
        Revert in the cloud
      </button>
      {!canRevert && (
        <p id="revert-hint" className="hint">
          {DEVOPS_HINT}
        </p>
      )}
      <Alert message={error} />
    </section>
  );
}

/** The wizard's link to a new session with this one's repository, cloud, scope and path. */
function replacement(d: Detail): string {
  const q = new URLSearchParams({
    repository_url: d.repository_url,
    cloud: d.cloud,
    scope_id: d.scope_id,
    ...(d.iac_path ? { iac_path: d.iac_path } : {}),
  });
  return `/new?${q.toString()}`;
}

/** A follow-up request: only the text (and the mode); the session knows the rest. */
function FollowUp({ detail: d, me, onSent }: { detail: Detail; me: Me; onSent: () => void }) {
  const canDrift = me.role === 'devops' || me.role === 'admin';
  const [mode, setMode] = useState<DriftMode>('partial');
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const running = d.in_flight !== null;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const body = { session_id: d.session_id, text };
    const res = await api.POST(MODE_ROUTES[mode], { body });
    setBusy(false);
    if (res.response.status !== 202) setError(errorMessage(res.error, `HTTP ${res.response.status}`));
    else if (res.data?.accepted === false) setError(res.data.reason ?? 'The session refused the request.');
    else setText('');
    onSent();
  };
  return (
    <section aria-labelledby="follow-up-title">
      <h2 id="follow-up-title">Follow-up request</h2>
      <form className="wizard" onSubmit={(e) => void submit(e)}>
        <ModeChoice name="follow-up-mode" mode={mode} onChange={setMode} enabled={canDrift} />
        <label htmlFor="follow-up-text">Request</label>
        <textarea id="follow-up-text" rows={2} value={text} onChange={(e) => setText(e.target.value)} />
        <button
          type="submit"
          disabled={!canDrift || busy || running || text.trim() === ''}
          aria-describedby={running ? 'follow-up-running' : undefined}
        >
          Send follow-up
        </button>
        {running && (
          <p id="follow-up-running" className="hint">
            A round is running; send the next request when it ends.
          </p>
        )}
        <Alert message={error} />
      </form>
    </section>
  );
}

/**
 * The results view: "Create Pull Request" once a round changed the code, then the pull request
 * (its link when the forge has a page) and a button for merging only — a drift session ends at the
 * merge, no apply follows. Merging is disabled while the session is locked.
 */
function Results({ detail: d, onChange }: { detail: Detail; onChange: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // A round that changed the code: a drift round that completed, or a generate round that wrote a
  // change (a revert writes none).
  const changed = d.rounds.some(
    (r) =>
      r.status === 'completed' &&
      (r.kind === 'partial' ||
        r.kind === 'full' ||
        (r.kind === 'generate' &&
          d.artifacts.some(
            (a) =>
              a.key.startsWith(`sessions/${d.session_id}/rounds/${r.round_id}/generate/`) &&
              a.key.endsWith('/changes.diff'),
          ))),
  );
  const generated = d.rounds.some((r) => r.kind === 'generate');
  const running = d.in_flight !== null;
  const act = async (what: 'pull-request' | 'merge') => {
    setBusy(true);
    setError(null);
    const res =
      what === 'pull-request'
        ? await api.POST('/api/v1/sessions/{id}/pull-request', { params: { path: { id: d.session_id } } })
        : await api.POST('/api/v1/sessions/{id}/merge', { params: { path: { id: d.session_id } } });
    setBusy(false);
    if (res.response.status >= 400) setError(errorMessage(res.error, `HTTP ${res.response.status}`));
    onChange();
  };
  if (!changed && !d.pull_request) return null;
  const pr = d.pull_request;
  return (
    <section aria-labelledby="results-title" className="results">
      <h2 id="results-title">Pull request</h2>
      {!pr ? (
        <button
          type="button"
          disabled={busy || running || d.status !== 'ACTIVE'}
          onClick={() => void act('pull-request')}
        >
          Create Pull Request
        </button>
      ) : (
        <>
          <p data-testid="pull-request">
            {pr.number !== null ? `#${pr.number}` : 'Branch merge'} into {pr.base} · {pr.status}
            {pr.url && (
              <>
                {' · '}
                <a href={pr.url} target="_blank" rel="noreferrer noopener">
                  open on the forge
                </a>
              </>
            )}
          </p>
          {pr.status === 'open' && (
            <>
              <button
                type="button"
                disabled={busy || running || d.locked}
                aria-describedby={d.locked ? 'merge-locked' : undefined}
                onClick={() => void act('merge')}
              >
                {generated ? 'Merge pull request' : 'Merge pull request (merge only, no apply)'}
              </button>
              {d.locked && (
                <p id="merge-locked" className="hint">
                  Merging is blocked while the session is locked
                  {d.lock_reason ? `: ${d.lock_reason}` : ' by an admin.'}
                </p>
              )}
            </>
          )}
        </>
      )}
      {d.status === 'MERGED' && (
        <p role="status">Merged: this {generated ? '' : 'drift '}session has ended.</p>
      )}
      <Alert message={error} />
    </section>
  );
}

/** Every address of a plan with its action (plans pinned before the list: destroyed and replaced). */
function planned(impact: PinnedPlan['impact']): { address: string; action: string }[] {
  if (impact.changes?.length) return impact.changes;
  return [
    ...impact.destroyed.map((address) => ({ address, action: 'destroy' })),
    ...impact.replaced.map((address) => ({ address, action: 'replace' })),
  ];
}

/**
 * The pinned plan of a generate round: the impact banner (what apply will create, update, replace
 * and destroy), every address in the plan with its action, the -target it was made with and the
 * root's other pending changes it leaves out, its compliance audit, its approval when
 * the installation asks for a second person's (four eyes), and Apply.
 */
function PinnedPlanPanel({
  detail: d,
  plan,
  onChange,
}: {
  detail: Detail;
  plan: PinnedPlan;
  onChange: () => void;
}) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const { impact } = plan;
  const blocked =
    plan.compliance !== undefined &&
    !plan.compliance.passed &&
    d.compliance_override?.round_id !== plan.round_id;
  const awaitingApproval = d.approval_required && d.plan_approval === null;
  const act = async (path: '/api/v1/sessions/{id}/apply' | '/api/v1/sessions/{id}/approve') => {
    setBusy(true);
    setError(null);
    const res = await api.POST(path, { params: { path: { id: d.session_id } } });
    setBusy(false);
    if (res.response.status >= 400) setError(errorMessage(res.error, `HTTP ${res.response.status}`));
    onChange();
  };
  return (
    <section aria-labelledby="plan-title" className="results">
      <h2 id="plan-title">Pinned plan</h2>
      <p data-testid="impact-banner" className={impact.destroy + impact.replace > 0 ? 'error' : 'hint'}>
        {impact.create} to create · {impact.update} to update · {impact.replace} to replace · {impact.destroy}{' '}
        to destroy
      </p>
      <table aria-label="In this plan">
        <thead>
          <tr>
            <th scope="col">Address</th>
            <th scope="col">Action</th>
          </tr>
        </thead>
        <tbody>
          {planned(impact).map((c) => (
            <tr key={c.address} data-change={c.address}>
              <td>
                <code>{c.address}</code>
              </td>
              <td className={c.action === 'destroy' || c.action === 'replace' ? 'error' : undefined}>
                {c.action}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="hint" data-testid="plan-targets">
        {impact.targets?.length
          ? `Planned with -target ${impact.targets.join(', ')}: nothing else is applied.`
          : 'Planned on the whole root.'}
      </p>
      {(impact.not_in_plan ?? []).length > 0 && (
        <div data-testid="not-in-plan">
          <p>
            Not in this plan: {impact.not_in_plan?.length} resource
            {impact.not_in_plan?.length === 1 ? '' : 's'} would change — never applied with it:
          </p>
          <ul>
            {impact.not_in_plan?.map((c) => (
              <li key={c.address}>
                <code>{c.address}</code> {c.action}
              </li>
            ))}
          </ul>
        </div>
      )}
      <p className="hint">
        Round {plan.round_id} · commit <code>{plan.commit.slice(0, 12)}</code> · state serial{' '}
        {plan.state_serial ?? 'none'} · SHA-256 <code>{plan.sha256.slice(0, 16)}…</code>
      </p>
      {plan.compliance && (
        <div data-testid="compliance">
          <p>
            Compliance:{' '}
            {plan.compliance.passed
              ? 'passed'
              : `${plan.compliance.deny.length} deny-level finding(s)${blocked ? ' — apply is blocked' : ' — overridden by an admin'}`}
          </p>
          <ul>
            {plan.compliance.deny.map((m) => (
              <li key={`deny-${m}`}>deny: {m}</li>
            ))}
            {plan.compliance.warn.map((m) => (
              <li key={`warn-${m}`}>warn: {m}</li>
            ))}
          </ul>
        </div>
      )}
      {d.approval_required &&
        (d.plan_approval ? (
          <p data-testid="plan-approval">
            Approved by {d.plan_approval.name} at {new Date(d.plan_approval.at).toLocaleString()}
          </p>
        ) : (
          <p data-testid="plan-approval" className="hint">
            Applying needs a second devops or admin to approve this plan (not the person who pinned it).
          </p>
        ))}
      {awaitingApproval && (
        <button
          type="button"
          disabled={busy || d.status !== 'ACTIVE'}
          onClick={() => void act('/api/v1/sessions/{id}/approve')}
        >
          Approve the pinned plan
        </button>
      )}
      <button
        type="button"
        disabled={busy || d.in_flight !== null || d.status !== 'ACTIVE' || blocked || awaitingApproval}
        onClick={() => void act('/api/v1/sessions/{id}/apply')}
      >
        Apply the pinned plan
      </button>
      <Alert message={error} />
    </section>
  );
}
