// What a session may revert in the cloud: the drift its latest drift round found — what the report
// left (unreconciled_drift, whitelisted_exceptions) and every drifted address of its plans. Read
// from the round's own artifacts; a person picks from these, never an address the round did not see.
import { z } from 'zod';
import { sessionArtifacts } from '../shared/db/artifacts';
import { sessionRounds } from '../shared/db/sessions';
import type { Db } from '../shared/db';
import { driftReportSchema } from '../shared/drift-report';
import type { ArtifactStore } from '../shared/object-store';

const iterationReportSchema = z.looseObject({
  drift: z.array(z.looseObject({ address: z.string() })),
});

const parsed = async <T>(
  artifacts: ArtifactStore,
  key: string,
  schema: z.ZodType<T>,
): Promise<T | undefined> => {
  try {
    const r = schema.safeParse(JSON.parse(await artifacts.getText(key)));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
};

/** The addresses of the drift the session's latest completed drift round found (empty: none). */
export async function revertableAddresses(
  db: Db,
  artifacts: ArtifactStore,
  sessionId: string,
): Promise<string[]> {
  const rounds = await sessionRounds(db, sessionId);
  const last = [...rounds]
    .reverse()
    .find((r) => (r.kind === 'partial' || r.kind === 'full') && r.status === 'completed' && r.report_key);
  if (!last?.report_key) return [];
  const out = new Set<string>();
  const report = await parsed(artifacts, last.report_key, driftReportSchema);
  for (const d of report?.unreconciled_drift ?? []) out.add(d.address);
  for (const w of report?.whitelisted_exceptions ?? []) out.add(w.address);
  const prefix = `sessions/${sessionId}/rounds/${last.round_id}/iteration-`;
  const keys = (await sessionArtifacts(db, sessionId)).filter(
    (k) => k.startsWith(prefix) && k.endsWith('/drift-report.json'),
  );
  for (const k of keys)
    for (const d of (await parsed(artifacts, k, iterationReportSchema))?.drift ?? []) out.add(d.address);
  return [...out].sort();
}
