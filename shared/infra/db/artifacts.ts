// The artifact index: every object written under a session's round (`sessions/<session>/rounds/
// <round>/…`) is recorded here as it is written, so reading a session never lists the object store.
// Idempotent: a retried activity that overwrites an object updates its row.
import { sql } from 'kysely';
import type { ArtifactIndex, ArtifactRef } from '../object-store';
import type { Db } from './index';
import { notifySessionChanged } from './sessions';

const ROUND_KEY = /^sessions\/([^/]+)\/rounds\/([^/]+)\/./;

export function artifactIndex(db: Db): ArtifactIndex {
  return {
    async recorded(ref: ArtifactRef): Promise<void> {
      const m = ROUND_KEY.exec(ref.key);
      if (!m?.[1] || !m[2]) return;
      const values = { session_id: m[1], round_id: m[2], bytes: ref.bytes, content_type: ref.contentType };
      await db
        .insertInto('session_artifacts')
        .values({ key: ref.key, ...values })
        .onConflict((oc) => oc.column('key').doUpdateSet({ ...values, updated_at: sql`now()` }))
        .execute();
      await notifySessionChanged(db, m[1]);
    },
  };
}

/** A session's artifacts, by key. */
export async function sessionArtifacts(db: Db, sessionId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('session_artifacts')
    .select('key')
    .where('session_id', '=', sessionId)
    .orderBy('key')
    .execute();
  return rows.map((r) => r.key);
}
