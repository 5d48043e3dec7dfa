// What a session may revert in the cloud: the drift its latest drift round left — the report's
// unreconciled_drift and whitelisted_exceptions, and every drifted address of the round's last plan.
// Read from the round's own artifacts; a person picks from these, never an address the round did not
// see. Drift the round adopted into the branch's code is not among them: there the code already
// follows the cloud.
import { z } from 'zod';
import { sessionArtifacts } from '../shared/infra/db/artifacts';
import { sessionRounds } from '../shared/infra/db/sessions';
import type { Db } from '../shared/infra/db';
import { driftReportSchema } from '../shared/drift-report';
import type { ArtifactStore } from '../shared/infra/object-store';

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

/** The addresses of the drift the session's latest completed drift round left (empty: none). */
export async function revertableAddresses(
  db: Db,
  artifacts: ArtifactStore,
  sessionId: string,
): Promise<string[]> {
  const rounds = await sessionRounds(db, sessionId);
  const last = [...rounds]
    .reverse()
    // Completed, or uncompleted with nothing to change (every drift excepted): both report.
    .find(
      (r) =>
        (r.kind === 'partial' || r.kind === 'full') &&
        (r.status === 'completed' || r.status === 'uncompleted') &&
        r.report_key,
    );
  if (!last?.report_key) return [];
  const out = new Set<string>();
  const report = await parsed(artifacts, last.report_key, driftReportSchema);
  for (const d of report?.unreconciled_drift ?? []) out.add(d.address);
  for (const w of report?.whitelisted_exceptions ?? []) out.add(w.address);
  // The drift of its last plan: the round's final plan when it ran one (the iteration bound
  // reached), else its last iteration's — when that plan found drift (what an earlier iteration
  // found and a cycle reconciled is not drift any more).
  const prefix = `sessions/${sessionId}/rounds/${last.round_id}/iteration-`;
  const steps = new Set(
    (await sessionArtifacts(db, sessionId))
      .filter((k) => k.startsWith(prefix))
      .map((k) => k.slice(prefix.length).split('/')[0] ?? ''),
  );
  const numbered = [...steps].map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const lastStep = steps.has('final') ? 'final' : numbered.length ? String(Math.max(...numbered)) : undefined;
  if (lastStep) {
    const found = await parsed(artifacts, `${prefix}${lastStep}/drift-report.json`, iterationReportSchema);
    for (const d of found?.drift ?? []) out.add(d.address);
  }
  return [...out].sort();
}
