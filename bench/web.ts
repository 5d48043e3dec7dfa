// Benchmark (issue 12): the web application's budgets, in Debian's Chromium on the real stack.
//   1. First load: the JavaScript the browser fetches to show the sign-in page and then the session
//      list, gzipped (budget ≤ 250 KB); the artifact viewer is a separate chunk loaded only with a
//      session's artifacts, reported beside it.
//   2. A round's status change → visible in an open session page: from the moment the round
//      recorded the change (the event's own timestamp, the workflow's clock) to the moment the page's
//      DOM showed it (a MutationObserver in the page), over real rounds on the drift test bed
//      (target p95 ≤ 250 ms). Prints `BENCH_WEB {json}` last.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createApp } from '../api/app';
import { startEventsHub } from '../api/events-hub';
import { ensureWebBuild } from '../scripts/web-build';
import { loadConfig } from '../shared/infra/config';
import { createDb, migrate } from '../shared/infra/db';
import { createUser } from '../shared/infra/db/users';
import { ensureGitConnection } from '../shared/infra/db/git-connections';
import { quietKnownWarnings } from '../shared/infra/logger';
import { launchBrowser } from '../test/support/browser';
import { createDriftTestBed } from '../test/support/drift-test-bed';
import { startStackWorker, startTestStackProcess } from '../test/support/test-stack';
import { stopOnSignal } from './stop-on-signal';

quietKnownWarnings();
Runtime.install({ logger: new DefaultLogger('ERROR') });
const ROUNDS = Number(process.env.BENCH_WEB_ROUNDS ?? 8);
/** The events route's store poll, as shipped (orchestration.session_events_poll_ms). */
const POLL_MS = loadConfig({}).orchestration.session_events_poll_ms;

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

const webDist = await ensureWebBuild();
const { stack, stop } = await startTestStackProcess();
stopOnSignal(stop);
try {
  const db = createDb(stack.databaseUrl, { max: 8 });
  await migrate(db);
  const { token, user } = await createUser(db, {
    name: `bench-web-${Date.now()}`,
    role: 'devops',
    organization: 'bench-web',
  });
  // The organization may name repositories on the run's git host (a git connection).
  await ensureGitConnection(db, user.organization_uuid, stack.gitHostUrl, 'git');
  const sw = await startStackWorker(stack, 'bench-web');
  const hub = startEventsHub(stack.databaseUrl);
  const app = createApp({
    checks: [],
    log: () => undefined,
    webDist,
    artifactOrigin: stack.s3Endpoint,
    sessions: {
      db,
      client: sw.client,
      taskQueue: 'bench-web',
      orchestration: { max_drift_reports: 3, drift_group_operations: 8 },
      artifacts: sw.artifacts,
      presignTtlSeconds: 300,
      events: { pollMs: POLL_MS, maxPolls: 100_000 },
      hub,
    },
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const browser = await launchBrowser();

  // 1. First load.
  const context = await browser.newContext();
  const page = await context.newPage();
  const scripts = new Set<string>();
  page.on('response', (r) => {
    if (r.request().resourceType() === 'script' && r.url().startsWith(url))
      scripts.add(new URL(r.url()).pathname);
  });
  await page.goto(`${url}/`);
  await page.getByLabel('Access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor();
  const sizes = (paths: Iterable<string>) =>
    [...paths].reduce(
      (acc, p) => {
        const body = readFileSync(join(webDist, p));
        return { raw: acc.raw + body.length, gz: acc.gz + gzipSync(body).length };
      },
      { raw: 0, gz: 0 },
    );
  const first = sizes(scripts);

  // 2. Status changes of real rounds, seen in an open session page.
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const bed = await createDriftTestBed({ gitHostUrl: stack.gitHostUrl, git: sw.git, engine: sw.engine });
  const post = async (body: Record<string, unknown>) =>
    (await (
      await fetch(`${url}/api/v1/drift/full`, { method: 'POST', headers, body: JSON.stringify(body) })
    ).json()) as {
      session_id: string;
    };
  const waitIdle = async (sessionId: string, rounds: number) => {
    for (;;) {
      const d = (await (await fetch(`${url}/api/v1/sessions/${sessionId}`, { headers })).json()) as {
        rounds: unknown[];
        in_flight: unknown;
      };
      if (d.rounds.length >= rounds && d.in_flight === null) return;
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const { session_id } = await post({
    repository_url: bed.repoUrl,
    cloud: 'aws',
    scope_id: 'bench',
    text: 'Reconcile everything.',
  });
  await waitIdle(session_id, 1);
  // The page records, per round, the wall-clock time each status first showed.
  await page.addInitScript(`
    window.__shown = {};
    new MutationObserver(() => {
      for (const li of document.querySelectorAll('[data-round]')) {
        const s = li.querySelector('[data-testid=round-status]');
        const key = li.getAttribute('data-round') + ' ' + (s ? s.textContent : '');
        if (s && !(key in window.__shown)) window.__shown[key] = performance.timeOrigin + performance.now();
      }
    }).observe(document, { subtree: true, childList: true, characterData: true });
  `);
  await page.goto(`${url}/sessions/${session_id}`);
  await page.getByRole('heading', { name: `Session ${session_id}` }).waitFor();
  const opened = Date.now();
  for (let i = 0; i < ROUNDS; i++) {
    await post({ session_id, text: 'Reconcile everything.' });
    await waitIdle(session_id, i + 2);
  }
  // Every round shown at its end in the page.
  await page.waitForFunction(
    `[...document.querySelectorAll('[data-round] [data-testid=round-status]')].filter((s) =>
      ['completed', 'uncompleted', 'failed'].includes(s.textContent)).length >= ${ROUNDS + 1}`,
  );
  const shown = await page.evaluate<Record<string, number>>('window.__shown');
  const events = await db
    .selectFrom('session_events')
    .select(['round_id', 'data'])
    .where('session_id', '=', session_id)
    .where('type', '=', 'status')
    .execute();
  const delays: number[] = [];
  for (const e of events) {
    const data = e.data as { status?: string; at?: string };
    if (!data.at || !data.status || Date.parse(data.at) < opened) continue;
    const t = shown[`${e.round_id} ${data.status}`];
    if (t !== undefined) delays.push(Math.max(0, t - Date.parse(data.at)));
  }
  const result = {
    first_load_js_gzip_kb: Math.round(first.gz / 102.4) / 10,
    first_load_js_raw_kb: Math.round(first.raw / 102.4) / 10,
    artifact_chunk_gzip_kb:
      Math.round(
        sizes(
          readdirSync(join(webDist, 'assets'))
            .filter((f) => /^Artifacts-.*\.js$/.test(f))
            .map((f) => `/assets/${f}`),
        ).gz / 102.4,
      ) / 10,
    status_to_dom_p50_ms: Math.round(pct(delays, 50)),
    status_to_dom_p95_ms: Math.round(pct(delays, 95)),
    status_changes: delays.length,
  };
  console.log(
    `web: first load ${result.first_load_js_gzip_kb} KB JS gzipped (${result.first_load_js_raw_kb} KB raw, ${scripts.size} file(s); budget 250 KB); the artifact viewer loads later: ${result.artifact_chunk_gzip_kb} KB gzipped`,
  );
  console.log(
    `web: round status change → DOM over ${delays.length} changes in ${ROUNDS} rounds (events pushed by the store's NOTIFY; ${POLL_MS} ms polls only without it): p50 ${result.status_to_dom_p50_ms} ms, p95 ${result.status_to_dom_p95_ms} ms (target p95 ≤ 250 ms)`,
  );
  console.log(`BENCH_WEB ${JSON.stringify(result)}`);
  await browser.close();
  server.closeAllConnections();
  server.close();
  await bed.destroy();
  await hub.close();
  await sw.stop();
  await db.destroy();
} finally {
  await stop();
}
