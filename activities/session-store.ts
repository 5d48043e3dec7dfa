// The session store's writes, as activities: the session workflow records its status, its rounds
// and their start and end; a round records its own events. Idempotent: rounds are upserted by id,
// events skipped when their source key is already written, so a retried activity adds nothing.
import type { RoundEvent } from '../shared/contracts';
import type { Db } from '../shared/infra/db';
import { recordEvents, recordSession, type SessionRecord } from '../shared/infra/db/sessions';

export function createSessionStoreActivities(deps: { db: Db }) {
  return {
    async recordSession(rec: SessionRecord): Promise<void> {
      await recordSession(deps.db, rec);
    },

    /** A round's events, in order; each keyed by the round and its place in it. */
    async recordRoundEvents(input: {
      sessionId: string;
      roundId: string;
      events: RoundEvent[];
    }): Promise<void> {
      await recordEvents(
        deps.db,
        input.sessionId,
        input.events.map((e) => ({
          source_key: `${input.roundId}:${e.seq}`,
          round_id: input.roundId,
          type: e.type,
          data: { round_id: input.roundId, ...e },
          at: e.at,
        })),
      );
    },
  };
}
