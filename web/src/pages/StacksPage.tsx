// Stacks and the drift inbox: the organization's registered roots with their Temporal Schedule
// (paused or not, its note, the next run) and their detection runs; the inbox of drift items, open
// or resolved, each with what the code declares and what the cloud has, from which a devops either
// adopts chosen items (a partial drift session: the code follows the cloud) or reverts them (a
// session whose generate round pins a plan of the unchanged code for exactly their addresses).
//   /stacks          the stacks, a new stack (devops)
//   /stacks/<stack>  one stack: its schedule (pause, resume, run now) and its runs
//   /inbox           the drift inbox
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, ok, type Answer, type Me } from '../api/client';
import { Alert } from '../components/Alert';
import { Link } from '../components/Link';
import { QueryState } from '../components/QueryState';
import { navigate } from '../router';

/** A stack as the API answers it: the registered fields and its schedule's state. */
type Stack = Answer<'/api/v1/stacks/{id}', 'get'>;
type ScheduleState = Stack['schedule_state'];

/** A value from an inbox item, as text (never markup): unset, a string as it is, anything else as JSON. */
export const valueText = (v: unknown): string =>
  v === null || v === undefined ? '(not set)' : typeof v === 'string' ? v : JSON.stringify(v);

const when = (iso: string | null | undefined) =>
  iso ? <time dateTime={iso}>{new Date(iso).toLocaleString()}</time> : '—';

function scheduleText(s: Stack['schedule']): string {
  const base =
    s.interval_minutes !== undefined
      ? `every ${s.interval_minutes} min`
      : `cron ${s.cron ?? ''}${s.time_zone ? ` (${s.time_zone})` : ''}`;
  return s.jitter_seconds ? `${base}, jitter ${s.jitter_seconds} s` : base;
}

function scheduleStatus(st: ScheduleState | null): string {
  if (!st) return 'no schedule';
  return st.paused ? `paused${st.note ? `: ${st.note}` : ''}` : 'active';
}

export function StacksPage({ me, path }: { me: Me; path: string }) {
  const one = /^\/stacks\/([0-9a-f-]{36})$/.exec(path);
  if (one?.[1]) return <StackView stackId={one[1]} me={me} />;
  return <Overview me={me} />;
}

function Overview({ me }: { me: Me }) {
  const stacks = useQuery({
    queryKey: ['stacks'],
    queryFn: async () => (await ok(api.GET('/api/v1/stacks'))).stacks,
  });
  return (
    <section aria-labelledby="stacks-title">
      <h1 id="stacks-title">Stacks</h1>
      <p className="hint">
        Roots checked for drift on their own schedule. What the runs find is in the{' '}
        <Link to="/inbox">drift inbox</Link>.
      </p>
      <QueryState query={stacks} loading="Loading the stacks…" empty="No stack yet.">
        {(data) => (
          <table aria-label="Stacks">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Repository</th>
                <th scope="col">Cloud</th>
                <th scope="col">Schedule</th>
                <th scope="col">State</th>
                <th scope="col">Next run</th>
              </tr>
            </thead>
            <tbody>
              {data.map((s) => (
                <tr key={s.stack_uuid} data-stack={s.name}>
                  <td>
                    <Link to={`/stacks/${s.stack_uuid}`}>{s.name}</Link>
                  </td>
                  <td>
                    {s.repository_url}
                    {s.iac_path ? ` (${s.iac_path})` : ''}
                  </td>
                  <td>{s.cloud}</td>
                  <td>{scheduleText(s.schedule)}</td>
                  <td data-testid="schedule-state">{scheduleStatus(s.schedule_state)}</td>
                  <td>{s.schedule_state?.paused ? '—' : when(s.schedule_state?.next_runs[0])}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
      {me.role !== 'developer' && <StackForm />}
    </section>
  );
}

function StackForm() {
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [repository, setRepository] = useState('');
  const [cloud, setCloud] = useState('aws');
  const [scope, setScope] = useState('');
  const [path, setPath] = useState('');
  const [minutes, setMinutes] = useState('60');
  const [auto, setAuto] = useState<'off' | 'open_session'>('off');
  const create = useMutation({
    mutationFn: () =>
      ok(
        api.POST('/api/v1/stacks', {
          body: {
            name: name.trim(),
            repository_url: repository.trim(),
            cloud: cloud as 'aws',
            scope_id: scope.trim(),
            ...(path.trim() ? { iac_path: path.trim() } : {}),
            schedule: { interval_minutes: Number(minutes) },
            auto_remediate: auto,
          },
        }),
      ),
    onSuccess: (s) => {
      void qc.invalidateQueries({ queryKey: ['stacks'] });
      navigate(`/stacks/${s.stack_uuid}`);
    },
  });
  return (
    <form
      className="inline-form"
      aria-label="New stack"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <h2>New stack</h2>
      <label htmlFor="stack-name">Name</label>
      <input id="stack-name" value={name} onChange={(e) => setName(e.target.value)} />
      <label htmlFor="stack-repository">Repository URL</label>
      <input
        id="stack-repository"
        value={repository}
        placeholder="https://git.example.com/org/infra.git"
        onChange={(e) => setRepository(e.target.value)}
      />
      <label htmlFor="stack-path">IaC path (optional)</label>
      <input id="stack-path" value={path} onChange={(e) => setPath(e.target.value)} />
      <label htmlFor="stack-cloud">Cloud</label>
      <select id="stack-cloud" value={cloud} onChange={(e) => setCloud(e.target.value)}>
        <option>aws</option>
        <option>gcp</option>
        <option>azure</option>
      </select>
      <label htmlFor="stack-scope">Scope id</label>
      <input id="stack-scope" value={scope} onChange={(e) => setScope(e.target.value)} />
      <label htmlFor="stack-interval">Every (minutes)</label>
      <input
        id="stack-interval"
        type="number"
        min={1}
        value={minutes}
        onChange={(e) => setMinutes(e.target.value)}
      />
      <label htmlFor="stack-auto">New drift</label>
      <select
        id="stack-auto"
        value={auto}
        onChange={(e) => setAuto(e.target.value as 'off' | 'open_session')}
      >
        <option value="off">only goes to the inbox</option>
        <option value="open_session">opens a partial drift session (never an apply)</option>
      </select>
      <button
        type="submit"
        disabled={create.isPending || !name.trim() || !repository.trim() || !scope.trim()}
      >
        Register stack
      </button>
      <Alert message={create.isError ? create.error.message : null} />
    </form>
  );
}

function StackView({ stackId, me }: { stackId: string; me: Me }) {
  const qc = useQueryClient();
  const canEdit = me.role !== 'developer';
  const stack = useQuery({
    queryKey: ['stacks', stackId],
    queryFn: () => ok(api.GET('/api/v1/stacks/{id}', { params: { path: { id: stackId } } })),
  });
  // What the cloud's audit trail said about this stack's resources (event-driven runs' cause).
  const changes = useQuery({
    queryKey: ['stacks', stackId, 'audit-changes'],
    queryFn: async () =>
      (await ok(api.GET('/api/v1/audit-changes', { params: { query: { stack: stackId, limit: 20 } } })))
        .changes,
  });
  // After "Run now", the runs refresh each second until the started run has shown up and finished.
  const [awaiting, setAwaiting] = useState<string | null>(null);
  const runs = useQuery({
    queryKey: ['stacks', stackId, 'runs'],
    queryFn: async () =>
      (await ok(api.GET('/api/v1/stacks/{id}/runs', { params: { path: { id: stackId } } }))).runs,
    // Live while a run is under way, or one was asked for and has not shown up yet.
    refetchInterval: (q) => {
      const data = q.state.data ?? [];
      if (data.some((r) => r.status === 'running')) return 1000;
      return awaiting !== null && !data.some((r) => r.run_id === awaiting) ? 1000 : false;
    },
  });
  const [note, setNote] = useState('');
  const act = useMutation({
    mutationFn: async (verb: 'pause' | 'resume' | 'trigger') => {
      const params = { params: { path: { id: stackId } } };
      if (verb === 'trigger') {
        const started = await ok(api.POST('/api/v1/stacks/{id}/trigger', params));
        setAwaiting(started.run_id);
        return started;
      }
      const body = note.trim() ? { note: note.trim() } : {};
      return verb === 'pause'
        ? ok(api.POST('/api/v1/stacks/{id}/pause', { ...params, body }))
        : ok(api.POST('/api/v1/stacks/{id}/resume', { ...params, body }));
    },
    onSuccess: (answer, verb) => {
      setNote('');
      // Pause and resume answer the stack as the schedule now describes itself: shown as it is.
      if (verb !== 'trigger') qc.setQueryData(['stacks', stackId], answer);
      void qc.invalidateQueries({ queryKey: ['stacks', stackId] });
    },
  });
  return (
    <QueryState query={stack} loading="Loading the stack…">
      {(s) => (
        <section aria-labelledby="stack-title">
          <p>
            <Link to="/stacks">All stacks</Link>
          </p>
          <h1 id="stack-title">{s.name}</h1>
          <dl className="facts">
            <dt>Repository</dt>
            <dd>
              {s.repository_url}
              {s.iac_path ? ` (${s.iac_path})` : ''}
              {s.branch ? ` · branch ${s.branch}` : ''}
            </dd>
            <dt>Cloud, scope</dt>
            <dd>
              {s.cloud} · {s.scope_id} · {s.engine}
            </dd>
            <dt>Schedule</dt>
            <dd>
              {scheduleText(s.schedule)} ·{' '}
              <span data-testid="schedule-state">{scheduleStatus(s.schedule_state)}</span>
              {s.schedule_state && ` · Temporal Schedule ${s.schedule_state.schedule_id}`}
            </dd>
            <dt>Next run</dt>
            <dd data-testid="next-run">
              {s.schedule_state?.paused ? '—' : when(s.schedule_state?.next_runs[0])}
            </dd>
            <dt>New drift</dt>
            <dd>
              {s.auto_remediate === 'open_session'
                ? 'opens a partial drift session (never an apply)'
                : 'only goes to the inbox'}
              {s.remediation_session_id && (
                <>
                  {' · last session '}
                  <Link to={`/sessions/${s.remediation_session_id}`}>{s.remediation_session_id}</Link>
                </>
              )}
            </dd>
          </dl>
          {canEdit && (
            <form className="inline-form" aria-label="Schedule" onSubmit={(e) => e.preventDefault()}>
              <label htmlFor="schedule-note">Note (optional)</label>
              <input id="schedule-note" value={note} onChange={(e) => setNote(e.target.value)} />
              {s.schedule_state?.paused ? (
                <button type="button" disabled={act.isPending} onClick={() => act.mutate('resume')}>
                  Resume schedule
                </button>
              ) : (
                <button type="button" disabled={act.isPending} onClick={() => act.mutate('pause')}>
                  Pause schedule
                </button>
              )}
              <button type="button" disabled={act.isPending} onClick={() => act.mutate('trigger')}>
                Run now
              </button>
              <Alert message={act.isError ? act.error.message : null} />
            </form>
          )}
          <h2>Detection runs</h2>
          <QueryState query={runs} loading="Loading the runs…" empty="No run yet.">
            {(data) => (
              <table aria-label="Detection runs">
                <thead>
                  <tr>
                    <th scope="col">Started</th>
                    <th scope="col">Status</th>
                    <th scope="col">Drifted</th>
                    <th scope="col">Opened</th>
                    <th scope="col">Resolved</th>
                    <th scope="col">Whitelisted</th>
                    <th scope="col">Session</th>
                  </tr>
                </thead>
                <tbody>
                  {data.map((r) => (
                    <tr key={r.run_id} data-run={r.run_id}>
                      <td>{when(r.started_at)}</td>
                      <td>
                        <span className={`status status-${r.status}`}>{r.status}</span>
                        {r.error && <span className="hint"> {r.error}</span>}
                      </td>
                      <td>{r.drift_count}</td>
                      <td>{r.opened}</td>
                      <td>{r.resolved}</td>
                      <td>{r.whitelisted}</td>
                      <td>
                        {r.session_id ? <Link to={`/sessions/${r.session_id}`}>{r.session_id}</Link> : '—'}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </QueryState>
          <h2>Changes from the cloud&apos;s audit trail</h2>
          <QueryState
            query={changes}
            loading="Loading the changes…"
            empty="No audit event has named this stack's resources."
          >
            {(data) => (
              <table aria-label="Audit changes">
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Who</th>
                    <th scope="col">Call</th>
                    <th scope="col">From</th>
                    <th scope="col">Resources</th>
                  </tr>
                </thead>
                <tbody>
                  {data.map((c) => (
                    <tr key={c.event_id} data-change={c.event_id}>
                      <td>{when(c.at)}</td>
                      <td>
                        <code>{c.actor}</code>
                      </td>
                      <td>{c.action}</td>
                      <td>{c.source_address}</td>
                      <td>
                        {c.stacks
                          .filter((t) => t.stack_uuid === stackId)
                          .flatMap((t) => t.addresses)
                          .map((a) => (
                            <code key={a}>{a} </code>
                          ))}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </QueryState>
          <p>
            <Link to={`/inbox?stack=${s.stack_uuid}`}>Drift items of this stack</Link>
          </p>
        </section>
      )}
    </QueryState>
  );
}

export function InboxPage({ me, search }: { me: Me; search: string }) {
  const params = new URLSearchParams(search);
  const stack = params.get('stack') ?? '';
  const [state, setState] = useState<'open' | 'resolved'>('open');
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  const canRemediate = me.role !== 'developer';
  const items = useQuery({
    queryKey: ['drift-items', stack, state],
    queryFn: async () =>
      (
        await ok(
          api.GET('/api/v1/drift-items', {
            params: { query: { state, ...(stack ? { stack } : {}) } },
          }),
        )
      ).items,
  });
  const remediate = useMutation({
    mutationFn: async (how: 'remediate' | 'revert') => {
      const body = { item_uuids: [...chosen] };
      return how === 'remediate'
        ? ok(api.POST('/api/v1/drift-items/remediate', { body }))
        : ok(api.POST('/api/v1/drift-items/revert', { body }));
    },
    onSuccess: (r) => navigate(`/sessions/${r.session_id}`),
  });
  const toggle = (id: string) =>
    setChosen((prev) => {
      const next = new Set(prev);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const chosenItems = (items.data ?? []).filter((i) => chosen.has(i.drift_item_uuid));
  const stacksChosen = new Set(chosenItems.map((i) => i.stack_uuid)).size;
  return (
    <section aria-labelledby="inbox-title">
      <h1 id="inbox-title">Drift inbox</h1>
      <p className="hint">
        One item per stack, resource and attribute: opened by the first run that sees it, resolved by the
        first run that no longer does. Whitelisted items are exceptions and never alert.
      </p>
      <fieldset className="mode-choice">
        <legend>Items</legend>
        {(['open', 'resolved'] as const).map((s) => (
          <label key={s}>
            <input
              type="radio"
              name="inbox-state"
              value={s}
              checked={state === s}
              onChange={() => {
                setState(s);
                setChosen(new Set());
              }}
            />
            {s}
          </label>
        ))}
      </fieldset>
      <QueryState
        query={items}
        loading="Loading the drift items…"
        empty={
          state === 'open'
            ? 'No open drift: every stack matched its code on its last run.'
            : 'No resolved item yet.'
        }
      >
        {(data) => (
          <table aria-label="Drift items">
            <thead>
              <tr>
                {state === 'open' && canRemediate && <th scope="col">Choose</th>}
                <th scope="col">Stack</th>
                <th scope="col">Resource</th>
                <th scope="col">Attribute</th>
                <th scope="col">Code declares</th>
                <th scope="col">Cloud has</th>
                <th scope="col">Action</th>
                <th scope="col">Changed by</th>
                <th scope="col">Seen</th>
                <th scope="col">{state === 'open' ? 'Last seen' : 'Resolved'}</th>
                <th scope="col">Session</th>
              </tr>
            </thead>
            <tbody>
              {data.map((i) => (
                <tr key={i.drift_item_uuid} data-item={`${i.address} ${i.attribute}`}>
                  {state === 'open' && canRemediate && (
                    <td>
                      {i.whitelisted ? (
                        <span className="hint">whitelisted</span>
                      ) : (
                        <input
                          type="checkbox"
                          aria-label={`Choose ${i.address} ${i.attribute}`}
                          checked={chosen.has(i.drift_item_uuid)}
                          onChange={() => toggle(i.drift_item_uuid)}
                        />
                      )}
                    </td>
                  )}
                  <td>
                    <Link to={`/stacks/${i.stack_uuid}`}>{i.stack_name}</Link>
                  </td>
                  <td>
                    <code>{i.address}</code>
                  </td>
                  <td>
                    <code>{i.attribute}</code>
                    {i.whitelisted && <span className="hint"> · exception {i.rule_id}</span>}
                    {i.note && <p className="hint">{i.note}</p>}
                  </td>
                  <td data-testid="declared">
                    <code>{valueText(i.declared)}</code>
                  </td>
                  <td data-testid="actual">
                    <code>{valueText(i.actual)}</code>
                  </td>
                  <td>{i.action}</td>
                  <td data-testid="changed-by">
                    {i.audit ? (
                      <>
                        <code>{i.audit.actor}</code>
                        <p className="hint">
                          {i.audit.action} from {i.audit.source_address}, {when(i.audit.at)}
                        </p>
                      </>
                    ) : (
                      <span className="hint">no audit event seen</span>
                    )}
                  </td>
                  <td>{i.runs_seen} run(s)</td>
                  <td>{state === 'open' ? when(i.last_seen_at) : when(i.resolved_at)}</td>
                  <td>{i.session_id ? <Link to={`/sessions/${i.session_id}`}>{i.session_id}</Link> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
      {state === 'open' && canRemediate && (
        <div className="inline-form">
          <button
            type="button"
            disabled={chosen.size === 0 || stacksChosen > 1 || remediate.isPending}
            aria-describedby="remediate-hint"
            onClick={() => remediate.mutate('remediate')}
          >
            Open a session on the chosen items
          </button>
          <button
            type="button"
            disabled={chosen.size === 0 || stacksChosen > 1 || remediate.isPending}
            aria-describedby="remediate-hint"
            onClick={() => remediate.mutate('revert')}
          >
            Revert in the cloud
          </button>
          <p id="remediate-hint" className="hint">
            {stacksChosen > 1
              ? 'Choose items of one stack: a session works on one root.'
              : 'Open a session: the code follows the cloud for exactly these resources (a pull request; it never applies). Revert in the cloud: a plan of the unchanged code for exactly these resources, pinned for review; nothing changes until it is applied.'}
          </p>
          <Alert message={remediate.isError ? remediate.error.message : null} />
        </div>
      )}
    </section>
  );
}
