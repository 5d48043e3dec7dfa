// A round's artifacts, rendered inline from their presigned URLs (fetched from the object store,
// which answers this origin with CORS; nothing is offered as a download): the drift report as
// tables, code changes as a highlighted diff (diff2html + highlight.js), plans and file contents
// as monospace text, prompts as Markdown. Everything here is data from a repository, a model or
// a report: React renders it as text, react-markdown never renders raw HTML and drops unsafe URLs,
// diff2html escapes every line and name. This module is loaded only when a session page shows
// artifacts, so the first load of the application stays small.
import { useQuery } from '@tanstack/react-query';
import { Diff2HtmlUI } from 'diff2html/lib-esm/ui/js/diff2html-ui-base';
import 'diff2html/bundles/css/diff2html.min.css';
import './artifacts.css';
import hljs from 'highlight.js/lib/core';
import json from 'highlight.js/lib/languages/json';
import plaintext from 'highlight.js/lib/languages/plaintext';
import { useEffect, useRef, useState, type RefObject } from 'react';
import Markdown from 'react-markdown';
import { driftReportSchema, type DriftReport } from '../../../shared/drift-report';
import { ErrorBoundary } from '../components/ErrorBoundary';
import { hcl } from './hcl';

hljs.registerLanguage('hcl', hcl);
hljs.registerLanguage('json', json);
hljs.registerLanguage('plaintext', plaintext);

export interface Artifact {
  key: string;
  url: string;
}

/** Shown in full up to this size; larger artifacts show their beginning and say so. */
const SHOWN_BYTES = 1_000_000;

type Kind = 'report' | 'diff' | 'markdown' | 'json' | 'binary' | 'text';

function kindOf(name: string): Kind {
  if (name === 'drift-report.json') return 'report';
  if (name.endsWith('.diff')) return 'diff';
  if (name.endsWith('.md')) return 'markdown';
  if (name.endsWith('.tfplan')) return 'binary';
  if (name.endsWith('.json')) return 'json';
  return 'text';
}

/** What a person calls the artifact (its name inside the round). */
function title(name: string): string {
  if (name === 'drift-report.json') return 'Drift report';
  if (name === 'prompt.md') return 'Prompt';
  if (name === 'targets.json') return 'Targets';
  const m = /^iteration-(\d+)\/(?:group-(\d+)\/)?(.+)$/.exec(name);
  if (!m) return name;
  const where = `iteration ${m[1]}${m[2] !== undefined ? `, group ${Number(m[2]) + 1}` : ''}`;
  const what: Record<string, string> = {
    'plan.txt': 'Plan',
    'plan.json': 'Plan (JSON)',
    'plan.tfplan': 'Plan file',
    'operations.json': 'Drift operations',
    'whitelisted.json': 'Whitelisted drift',
    'remediation.json': 'Remediation',
    'changes.diff': 'Code changes',
    'drift-report.json': 'Drift found',
  };
  const rest = m[3] ?? '';
  if (rest.startsWith('changes/')) return `File ${rest.slice('changes/'.length)} (${where})`;
  return `${what[rest] ?? rest} (${where})`;
}

function useArtifactText(a: Artifact, enabled: boolean) {
  return useQuery({
    queryKey: ['artifact', a.key],
    enabled,
    staleTime: 30_000,
    queryFn: async (): Promise<{ text: string; truncatedFrom?: number }> => {
      const res = await fetch(a.url, { credentials: 'omit' });
      if (!res.ok) throw new Error(`The object store answered ${res.status} for this artifact.`);
      const text = await res.text();
      return text.length > SHOWN_BYTES
        ? { text: text.slice(0, SHOWN_BYTES), truncatedFrom: text.length }
        : { text };
    },
  });
}

/** The artifacts of one round: report and diffs open, the rest a click away. */
export default function RoundArtifacts({ prefix, artifacts }: { prefix: string; artifacts: Artifact[] }) {
  const named = artifacts
    .map((a) => ({ ...a, name: a.key.slice(prefix.length) }))
    .sort((x, y) => order(x.name) - order(y.name) || x.name.localeCompare(y.name));
  if (named.length === 0) return null;
  return (
    <div className="artifacts">
      <h3>Artifacts</h3>
      {named.map((a) => (
        <ArtifactView key={a.key} artifact={a} name={a.name} />
      ))}
    </div>
  );
}

function order(name: string): number {
  const k = kindOf(name);
  return k === 'report' ? 0 : k === 'diff' ? 1 : name === 'prompt.md' ? 2 : 3;
}

function ArtifactView({ artifact, name }: { artifact: Artifact; name: string }) {
  const kind = kindOf(name);
  const open = kind === 'report' || kind === 'diff';
  return (
    <details className="artifact" open={open} data-artifact={name}>
      <summary>{title(name)}</summary>
      {kind === 'binary' ? (
        <p className="hint">
          The engine&apos;s binary plan file, kept for apply; its readable form is the Plan.
        </p>
      ) : (
        <ErrorBoundary what="artifact">
          <Loaded artifact={artifact} kind={kind} eager={open} />
        </ErrorBoundary>
      )}
    </details>
  );
}

function Loaded({ artifact, kind, eager }: { artifact: Artifact; kind: Kind; eager: boolean }) {
  // Fetched when its <details> is first opened (or at once for the report and the diffs).
  const ref = useRef<HTMLDivElement>(null);
  const shown = useOpen(ref, eager);
  const q = useArtifactText(artifact, shown);
  return (
    <div ref={ref} className="artifact-body">
      {!shown ? null : q.isPending ? (
        <p role="status">Loading…</p>
      ) : q.isError ? (
        <p className="error" role="alert">
          {q.error.message}
        </p>
      ) : (
        <>
          {q.data.truncatedFrom !== undefined && (
            <p className="hint">
              Showing the first {SHOWN_BYTES.toLocaleString()} of {q.data.truncatedFrom.toLocaleString()}{' '}
              characters.
            </p>
          )}
          <Rendered kind={kind} text={q.data.text} />
        </>
      )}
    </div>
  );
}

/** Whether the surrounding <details> is (or was once) open. */
function useOpen(ref: RefObject<HTMLDivElement | null>, initially: boolean): boolean {
  const [open, setOpen] = useState(initially);
  useEffect(() => {
    const details = ref.current?.closest('details');
    if (!details) return;
    const onToggle = () => details.open && setOpen(true);
    details.addEventListener('toggle', onToggle);
    return () => details.removeEventListener('toggle', onToggle);
  }, [ref, setOpen]);
  return open;
}

function Rendered({ kind, text }: { kind: Kind; text: string }) {
  switch (kind) {
    case 'report':
      return <ReportView text={text} />;
    case 'diff':
      return <DiffView diff={text} />;
    case 'markdown':
      return (
        <div className="markdown">
          <Markdown>{text}</Markdown>
        </div>
      );
    case 'json':
      return (
        <pre className="mono" tabIndex={0}>
          {pretty(text)}
        </pre>
      );
    default:
      return (
        <pre className="mono" tabIndex={0}>
          {text}
        </pre>
      );
  }
}

function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function DiffView({ diff }: { diff: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!ref.current) return;
    const ui = new Diff2HtmlUI(
      ref.current,
      diff,
      {
        drawFileList: false,
        matching: 'lines',
        outputFormat: 'line-by-line',
        highlight: true,
        // diff2html maps extensions it knows; Terraform's go to the HCL grammar above.
        highlightLanguages: new Map([
          ['tf', 'hcl'],
          ['tfvars', 'hcl'],
          ['hcl', 'hcl'],
          ['json', 'json'],
        ]),
        fileContentToggle: false,
        stickyFileHeaders: false,
      },
      hljs,
    );
    ui.draw(); // highlights too
  }, [diff]);
  return <div ref={ref} className="diff" tabIndex={0} aria-label="Code changes" />;
}

function ReportView({ text }: { text: string }) {
  let report: DriftReport | undefined;
  try {
    const parsed = driftReportSchema.safeParse(JSON.parse(text));
    report = parsed.success ? parsed.data : undefined;
  } catch {
    report = undefined;
  }
  if (!report)
    return (
      <pre className="mono" tabIndex={0}>
        {pretty(text)}
      </pre>
    );
  return (
    <div className="report">
      <p>
        <strong data-testid="report-outcome">{report.outcome}</strong> · {report.mode} drift ·{' '}
        {report.iterations} iteration(s) · branch {report.branch}
        {report.commit ? ` at ${report.commit.slice(0, 12)}` : ''}
      </p>
      <p>{report.summary}</p>
      <table aria-label="Remediated resources">
        <caption>Remediated resources</caption>
        <thead>
          <tr>
            <th scope="col">Resource</th>
            <th scope="col">Files</th>
          </tr>
        </thead>
        <tbody>
          {report.remediated_resources.length === 0 ? (
            <tr>
              <td colSpan={2} className="empty">
                None.
              </td>
            </tr>
          ) : (
            report.remediated_resources.map((r) => (
              <tr key={r.address}>
                <td className="mono">{r.address}</td>
                <td className="mono">{r.files.join(', ')}</td>
              </tr>
            ))
          )}
        </tbody>
      </table>
      {report.unreconciled_drift && (
        <table aria-label="Unreconciled drift">
          <caption>Unreconciled drift</caption>
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Attributes</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {report.unreconciled_drift.map((u) => (
              <tr key={u.address}>
                <td className="mono">{u.address}</td>
                <td className="mono">{u.attributes.join(', ')}</td>
                <td>{u.reason}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {report.whitelisted_exceptions && (
        <table aria-label="Whitelisted exceptions">
          <caption>Whitelisted exceptions</caption>
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Attributes</th>
              <th scope="col">Rule</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {report.whitelisted_exceptions.map((w) => (
              <tr key={`${w.address}:${w.rule_id}`}>
                <td className="mono">{w.address}</td>
                <td className="mono">{w.attributes.join(', ')}</td>
                <td className="mono">{w.rule_id}</td>
                <td>{w.reason}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
