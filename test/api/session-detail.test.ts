// The session detail is served from memory between changes (issue 13) and stays current: every
// write that changes what it shows — the session workflow's record, a lock, a pull request, an
// artifact — notifies the store's channel, and the next read shows it. Reading a session of another
// organization is still a 404, cached or not.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { recordSession } from '../../shared/infra/db/sessions';
import { roundArtifactKey } from '../../shared/ids';
import { insertSessionRow, roleTokens, startTestApi, type TestApi } from '../support/api';
import { subscribe } from '../support/sse';
import { artifactStore, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('session detail between changes', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let other: Record<'developer' | 'devops' | 'admin', string>;

  beforeAll(async () => {
    h = await temporalHarness('session-detail');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'session-detail');
    other = await roleTokens(db, 'session-detail-other');
    api = await startTestApi(h, db);
  });
  afterAll(async () => {
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  it('shows each change in the next read: a round, a lock, an artifact, a pull request', async () => {
    const { sessionId } = await insertSessionRow(db, tokens.devops, {
      session_id: `s-detail-${randomUUID().slice(0, 8)}`,
    });
    const read = async () => (await api.call('GET', `/api/v1/sessions/${sessionId}`, tokens.developer)).body;
    expect((await read()).rounds).toEqual([]);
    expect(await read()).toMatchObject({ rounds: [], locked: false, artifacts: [], pull_request: null });

    await recordSession(db, {
      sessionId,
      rounds: [{ round_id: 'r-1', kind: 'partial', status: 'started', text: 'Fix it.' }],
    });
    await expect.poll(async () => ((await read()).rounds as unknown[]).length).toBe(1);

    expect(
      (await api.call('PUT', `/api/v1/admin/sessions/${sessionId}/lock`, tokens.admin, { reason: 'freeze' }))
        .status,
    ).toBe(200);
    expect(await read()).toMatchObject({ locked: true, lock_reason: 'freeze' });

    const key = roundArtifactKey(sessionId, 'r-1', 'prompt.md');
    await artifactStore().putText(key, '# prompt');
    await expect
      .poll(async () => ((await read()).artifacts as { key: string }[]).map((a) => a.key))
      .toEqual([key]);

    // Another organization never sees it, before or after it is cached.
    expect((await api.call('GET', `/api/v1/sessions/${sessionId}`, other.admin)).status).toBe(404);
    expect((await api.call('DELETE', `/api/v1/admin/sessions/${sessionId}/lock`, tokens.admin)).status).toBe(
      200,
    );
    expect(await read()).toMatchObject({ locked: false, lock_reason: null });
    expect((await api.call('GET', `/api/v1/sessions/${sessionId}`, other.developer)).status).toBe(404);
  });

  it('gives raw plans and plan JSON to devops and admin only; a developer gets the rendered artifacts', async () => {
    const { sessionId } = await insertSessionRow(db, tokens.devops, {
      session_id: `s-raw-${randomUUID().slice(0, 8)}`,
    });
    const names = [
      'iteration-1/plan.tfplan',
      'iteration-1/plan.json',
      'iteration-1/plan.txt',
      'drift-report.json',
    ];
    const keys = names.map((n) => roundArtifactKey(sessionId, 'r-1', n));
    for (const key of keys) await artifactStore().putText(key, 'artifact');
    await recordSession(db, {
      sessionId,
      rounds: [{ round_id: 'r-1', kind: 'full', status: 'report', text: 'Reconcile.' }],
      events: keys.map((key, i) => ({
        source_key: `artifact-${i}`,
        round_id: 'r-1',
        type: 'artifact',
        data: { key },
      })),
    });
    const listed = async (token: string) =>
      (
        ((await api.call('GET', `/api/v1/sessions/${sessionId}`, token)).body.artifacts ?? []) as {
          key: string;
        }[]
      )
        .map((a) => a.key)
        .sort();
    const rendered = [keys[3], keys[2]].sort();
    await expect.poll(() => listed(tokens.devops)).toEqual([...keys].sort());
    // Served from the cache the devops read filled: still filtered for the developer.
    expect(await listed(tokens.developer)).toEqual(rendered);
    expect(await listed(tokens.admin)).toEqual([...keys].sort());

    // The event stream names every artifact; only devops and admin get a raw plan's URL.
    const urls = async (token: string) => {
      const events = await subscribe(`${api.url}/api/v1/events/subscribe/${sessionId}`, token, {
        stop: (e) => e.event === 'artifact' && e.data.key === keys[3],
      });
      return Object.fromEntries(
        events
          .filter((e) => e.event === 'artifact')
          .map((e) => [String(e.data.key), typeof e.data.url === 'string']),
      );
    };
    expect(await urls(tokens.developer)).toEqual({
      [keys[0] ?? '']: false,
      [keys[1] ?? '']: false,
      [keys[2] ?? '']: true,
      [keys[3] ?? '']: true,
    });
    expect(Object.values(await urls(tokens.devops))).toEqual([true, true, true, true]);
  });
});
