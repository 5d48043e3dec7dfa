// Server-sent events of a session over a real socket: every status change, artifact and report of
// a round (from the session's event log in the metadata store), ids that let a reconnecting client
// resume with Last-Event-ID, and the subscription closing after
// orchestration.max_session_events_iteration polls.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { eventsAfter, recordEvents, SESSION_EVENTS_CHANNEL } from '../../shared/infra/db/sessions';
import { startTestApi, type TestApi, testUser } from '../support/api';
import { subscribe, type Received } from '../support/sse';
import type { DriftTestBed } from '../support/drift-test-bed';
import { newTestBed, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('session events (SSE)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let token: string;

  beforeAll(async () => {
    h = await temporalHarness('events');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    token = (
      await testUser(db, { name: `devops-events-${Date.now()}`, role: 'devops', organization: 'events' })
    ).token;
    api = await startTestApi(h, db, { pollMs: 100, maxPolls: 600 });
    bed = await newTestBed();
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
  });

  it('relays every status change, artifact and report of a round, then resumes after Last-Event-ID', async () => {
    await bed.inject('ingress');
    const accepted = await api.call('POST', '/api/v1/drift/partial', token, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-events',
      text: 'Resolve the drift on security group sg-web-demo.',
    });
    const sessionId = accepted.body.session_id as string;
    const url = `${api.url}/api/v1/events/subscribe/${sessionId}`;
    const all = await subscribe(url, token, { stop: (e) => e.event === 'round_end' });

    expect(all[0]).toMatchObject({
      id: '1',
      event: 'round',
      data: { round_id: accepted.body.round_id, kind: 'partial' },
    });
    const statuses = all.filter((e) => e.event === 'status').map((e) => e.data.status);
    expect(statuses).toEqual([
      'started',
      'filtering',
      'generating',
      'validating',
      'generating',
      'report',
      'completed',
    ]);
    const report = all.find((e) => e.event === 'report');
    expect(report?.data.key).toMatch(/\/drift-report\.json$/);
    expect((await fetch(report?.data.url as string)).status).toBe(200);
    expect(all.filter((e) => e.event === 'artifact').length).toBeGreaterThanOrEqual(3);
    expect(all[all.length - 1]).toMatchObject({
      event: 'round_end',
      data: { status: 'completed', outcome: 'Succeeded' },
    });
    // Ids are the session log's sequence: 1, 2, 3, … with no gap.
    expect(all.map((e) => Number(e.id))).toEqual(all.map((_, i) => i + 1));

    // A client that saw up to the 4th event gets exactly the rest.
    const resumeFrom = all[3] as Received;
    const rest = await subscribe(url, token, {
      lastEventId: resumeFrom.id,
      stop: (e) => e.event === 'round_end',
    });
    expect(rest.map((e) => e.id)).toEqual(all.slice(4).map((e) => e.id));
  });

  it('pushes each event as the round records it: with a 10-minute poll interval the whole round still arrives', async () => {
    // Only a notification from the store (LISTEN/NOTIFY, one connection per API process) can wake
    // these streams before their interval ends.
    const slow = await startTestApi(h, db, { pollMs: 600_000, maxPolls: 3 });
    try {
      const accepted = await slow.call('POST', '/api/v1/drift/full', token, {
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-events-push',
        text: 'Reconcile everything.',
      });
      const sessionId = accepted.body.session_id as string;
      const url = `${slow.url}/api/v1/events/subscribe/${sessionId}`;
      // Two subscribers of the same session, woken by the same notifications.
      const [a, b] = await Promise.all([
        subscribe(url, token, { stop: (e) => e.event === 'round_end' }),
        subscribe(url, token, { stop: (e) => e.event === 'round_end' }),
      ]);
      expect(a.at(-1)?.event).toBe('round_end');
      expect(a.filter((e) => e.event === 'status').map((e) => e.data.status)).toContain('report');
      expect(b.map((e) => e.id)).toEqual(a.map((e) => e.id));
    } finally {
      slow.close();
    }
  });

  it('wakes every stream of a session with one read of its log: twenty tabs cost one query per change', async () => {
    // The API's store counts its reads of the event log.
    let reads = 0;
    const counted = db.withPlugin({
      transformQuery(args) {
        if (args.node.kind === 'SelectQueryNode' && JSON.stringify(args.node.from).includes('session_events'))
          reads++;
        return args.node;
      },
      transformResult(args) {
        return Promise.resolve(args.result);
      },
    });
    const tabs = await startTestApi(h, counted, { pollMs: 600_000, maxPolls: 3 });
    try {
      const accepted = await tabs.call('POST', '/api/v1/drift/full', token, {
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-events-tabs',
        text: 'Reconcile everything.',
      });
      const sessionId = accepted.body.session_id as string;
      const url = `${tabs.url}/api/v1/events/subscribe/${sessionId}`;
      await subscribe(url, token, { stop: (e) => e.event === 'round_end' });
      const last = (await eventsAfter(db, sessionId, 0)).at(-1)?.seq ?? 0;
      // Twenty streams one event short of the end of the log: each has read its backlog once it
      // has received that event.
      let ready = 0;
      let allReady: () => void = () => undefined;
      const backlogsRead = new Promise<void>((r) => (allReady = r));
      const streams = Array.from({ length: 20 }, () =>
        subscribe(url, token, {
          lastEventId: String(last - 1),
          stop: (e) => {
            if (e.id === String(last) && ++ready === 20) allReady();
            return e.id === String(last + 1);
          },
        }),
      );
      await backlogsRead;
      reads = 0;
      // One change to the session: one event appended, one notification.
      await recordEvents(db, sessionId, [
        {
          source_key: 'test:tabs',
          round_id: accepted.body.round_id as string,
          type: 'status',
          data: { status: 'report', at: new Date().toISOString() },
        },
      ]);
      const got = await Promise.all(streams);
      for (const g of got) expect(g.map((e) => e.id)).toEqual([String(last), String(last + 1)]);
      expect(reads).toBe(1);
    } finally {
      tabs.close();
    }
  });

  it('appends concurrent writers in one order: seqs without gaps, each writer in its own order, a retried write adds nothing, one notification each', async () => {
    const accepted = await api.call('POST', '/api/v1/drift/full', token, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-events',
      text: 'Reconcile everything.',
    });
    const sessionId = accepted.body.session_id as string;
    await subscribe(`${api.url}/api/v1/events/subscribe/${sessionId}`, token, {
      stop: (e) => e.event === 'round_end',
    });
    const before = (await eventsAfter(db, sessionId, 0)).at(-1)?.seq ?? 0;
    const listener = new pg.Client({ connectionString: stack().databaseUrl });
    await listener.connect();
    let notified = 0;
    listener.on('notification', (n) => {
      if (n.payload === sessionId) notified++;
    });
    await listener.query(`LISTEN ${SESSION_EVENTS_CHANNEL}`);
    try {
      const write = (w: number) =>
        recordEvents(
          db,
          sessionId,
          [1, 2, 3].map((i) => ({ source_key: `test:w${w}:${i}`, type: 'status', data: { w, i } })),
        );
      await Promise.all(Array.from({ length: 8 }, (_, w) => write(w)));
      await write(3); // a retried activity: every event already there
      const rows = await eventsAfter(db, sessionId, before);
      expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 24 }, (_, i) => before + i + 1));
      for (let w = 0; w < 8; w++)
        expect(
          rows
            .map((r) => r.data as { w: number; i: number })
            .filter((d) => d.w === w)
            .map((d) => d.i),
        ).toEqual([1, 2, 3]);
      await expect.poll(() => notified).toBe(9);
    } finally {
      await listener.end();
    }
  });

  it('closes the subscription after max_session_events_iteration polls', async () => {
    const short = await startTestApi(h, db, { pollMs: 50, maxPolls: 5 });
    try {
      const accepted = await short.call('POST', '/api/v1/drift/full', token, {
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-events',
        text: 'Reconcile everything.',
      });
      const events = await subscribe(
        `${short.url}/api/v1/events/subscribe/${accepted.body.session_id as string}`,
        token,
      );
      expect(events[events.length - 1]?.event).toBe('close');
    } finally {
      short.close();
    }
  });

  it("refuses a subscription without a token or to another organization's session", async () => {
    const other = (
      await testUser(db, { name: `dev-other-${Date.now()}`, role: 'developer', organization: 'elsewhere' })
    ).token;
    const accepted = await api.call('POST', '/api/v1/drift/full', token, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-events',
      text: 'Reconcile everything.',
    });
    const url = `${api.url}/api/v1/events/subscribe/${accepted.body.session_id as string}`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: `Bearer ${other}` } })).status).toBe(404);
  });
});
