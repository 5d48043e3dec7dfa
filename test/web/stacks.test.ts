// Stacks and the drift inbox in a real browser (Debian's Chromium) on the real API, worker and
// drift test bed: a devops registers a stack in the form, sees its schedule state and next run,
// runs it now and watches the run land in the table; drift injected between runs shows up in the
// inbox with what the code declares and what the cloud has, where choosing the item opens a partial
// drift session on exactly it, or reverts it in the cloud (as a session's found drift can be): the
// pinned plan lists exactly its address, and Apply puts it back; pausing with a note
// says so on the page and hides the next run, resuming brings it back; a developer reads it all
// without the controls; axe-core finds no serious or critical violation on the three views.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWebBuild } from '../../scripts/web-build';
import { createDb, type Db } from '../../shared/infra/db';
import { roundArtifactKey } from '../../shared/ids';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { expectAccessible, launchBrowser, signIn, screenshot } from '../support/browser';
import { APP_CONFIG, DRIFT_ADDRESSES, SG_WEB_DEMO, type DriftTestBed } from '../support/drift-test-bed';
import { triggerStackRun } from '../support/stack-runs';
import { ingressEvent } from '../support/audit-events';
import { INGESTION_SECRET_HEADER } from '../../shared/audit-events';
import { rmSync } from 'node:fs';
import {
  artifactStore,
  newTestBed,
  promptsWithAwsRules,
  REPLICAS_RULE,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

describe('web application: stacks and the drift inbox (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let browser: Browser;
  let bed: DriftTestBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;
  let prompts = '';

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    // The bed's replica count is tuned by hand: an exception rule whitelists it.
    prompts = promptsWithAwsRules(REPLICAS_RULE);
    h = await temporalHarness('web-stacks', testActivities({ promptsDir: prompts }));
    db = createDb(stack().databaseUrl);
    tokens = await roleTokens(db, `web-stacks-${Date.now()}`);
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, webDist);
    browser = await launchBrowser();
    bed = await newTestBed();
  });
  afterAll(async () => {
    await browser?.close();
    await bed?.destroy();
    api?.close();
    await db?.destroy();
    await h?.close();
    if (prompts) rmSync(prompts, { recursive: true, force: true });
  });

  const signedIn = (token: string, path: string) => signIn(browser, api.url, token, path);

  /**
   * Clicks "Run now" and waits for one more finished run row than there were. While the last run's
   * workflow is still closing the schedule counts it as running: the page says so (the API's 409)
   * and the run is asked for again.
   */
  const runNow = async (page: Page) => {
    const rows = page.getByRole('table', { name: 'Detection runs' }).locator('tbody tr');
    const button = page.getByRole('button', { name: 'Run now' });
    const busy = page.getByRole('alert').filter({ hasText: 'a run now is skipped while one runs' });
    const before = await rows.count();
    const deadline = Date.now() + 60_000;
    for (;;) {
      await button.click();
      // The answer: the started run's row, or the page saying that a run is going.
      await expect
        .poll(async () => (await rows.count()) > before || (await busy.isVisible()), { timeout: 30_000 })
        .toBe(true);
      if ((await rows.count()) > before) break;
      expect(Date.now(), 'the stack stayed busy').toBeLessThan(deadline);
    }
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(before + 1);
    const latest = rows.first();
    await expect.poll(() => latest.locator('.status').textContent(), { timeout: 90_000 }).not.toBe('running');
    return latest;
  };

  it('registers a stack, runs it, shows drift in the inbox and opens a session on the chosen item; pause and resume', async () => {
    const name = `web-stack-${Date.now()}`;
    const { context, page, errors } = await signedIn(tokens.devops, '/stacks');
    await page.getByRole('heading', { name: 'Stacks' }).waitFor();
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Repository URL').fill(bed.repoUrl);
    await page.getByLabel('Scope id').fill('scope-web');
    await page.getByLabel('Every (minutes)').fill('60');
    await page.getByRole('button', { name: 'Register stack' }).click();

    // The stack's page: its Temporal Schedule, active, with a next run.
    await page.getByRole('heading', { name }).waitFor();
    const stackUrl = page.url();
    const stackId = /\/stacks\/([0-9a-f-]{36})$/.exec(stackUrl)?.[1] ?? '';
    expect(stackId).not.toBe('');
    expect(await page.getByTestId('schedule-state').textContent()).toBe('active');
    await expect.poll(() => page.getByTestId('next-run').locator('time').count()).toBe(1);
    await expect.poll(() => page.getByText(`Temporal Schedule drift-schedule:${stackId}`).count()).toBe(1);

    // In sync first; then the ingress drift the next run finds and opens.
    const clean = await runNow(page);
    expect(await clean.locator('.status').textContent()).toBe('completed');
    expect(await clean.locator('td').nth(3).textContent()).toBe('0');
    await bed.inject('ingress');
    const drifted = await runNow(page);
    expect(await drifted.locator('td').nth(2).textContent()).toBe('1');
    expect(await drifted.locator('td').nth(3).textContent()).toBe('1');
    await expectAccessible(page, 'stack');
    await screenshot(page, 'stack');

    await page.getByRole('link', { name: 'Drift items of this stack' }).click();
    await page.getByRole('heading', { name: 'Drift inbox' }).waitFor();
    const item = page.locator(`tr[data-item="${DRIFT_ADDRESSES.ingress} data.ingress"]`);
    await item.waitFor();
    expect(await item.locator('td').nth(6).textContent()).toBe('update');
    // Found by the schedule: nobody's audit event named it.
    expect(await item.getByTestId('changed-by').textContent()).toBe('no audit event seen');
    // CloudTrail says who opened the port (an actor written to run in the page): a targeted run
    // sees the same item again and the page shows who, how, from where — as text.
    const issued = await api.call('POST', '/api/v1/admin/ingestion-secret', tokens.admin);
    const actor = 'arn:aws:sts::123456789012:assumed-role/ops/<img src=x onerror="window.__owned=1">';
    const delivered = await api.call(
      'POST',
      (issued.body.endpoints as { aws: string }).aws,
      undefined,
      ingressEvent('web-evt-1', 'sg-web-demo', { userIdentity: { type: 'AssumedRole', arn: actor } }),
      { [INGESTION_SECRET_HEADER]: issued.body.secret as string },
    );
    expect(delivered.body).toMatchObject({ stacks: 1 });
    await expect
      .poll(
        async () => {
          await page.reload();
          await item.waitFor();
          return item.getByTestId('changed-by').textContent();
        },
        { timeout: 60_000 },
      )
      .toMatch(
        /^arn:aws:sts::123456789012:assumed-role\/ops\/<img src=x onerror="window.__owned=1">ec2:AuthorizeSecurityGroupIngress from 203\.0\.113\.24, /,
      );
    expect(await page.evaluate('window.__owned')).toBeUndefined();
    // The stack page lists the change among its audit trail's, with the address it touched.
    await page.goto(stackUrl);
    const change = page.locator('tr[data-change="web-evt-1"]');
    await change.waitFor();
    expect(await change.locator('td').nth(2).textContent()).toBe('ec2:AuthorizeSecurityGroupIngress');
    expect(await change.locator('td').nth(4).textContent()).toBe(`${DRIFT_ADDRESSES.ingress} `);
    await expectAccessible(page, 'stack with audit changes');
    await page.getByRole('link', { name: 'Drift items of this stack' }).click();
    await item.waitFor();
    await expectAccessible(page, 'inbox');
    await screenshot(page, 'inbox');
    const open = page.getByRole('button', { name: 'Open a session on the chosen items' });
    expect(await open.isDisabled()).toBe(true);
    await page.getByLabel(`Choose ${DRIFT_ADDRESSES.ingress} data.ingress`).check();
    await open.click();
    await page.waitForURL(/\/sessions\/s-/);
    const sessionId = /\/sessions\/(s-[0-9a-f-]+)$/.exec(page.url())?.[1] ?? '';
    const detail = await waitForSession(api, tokens.devops, sessionId, 1);
    const pinned = JSON.parse(
      await artifactStore().getText(roundArtifactKey(sessionId, detail.rounds[0]!.round_id, 'targets.json')),
    ) as { targets: string[] };
    expect(pinned.targets).toEqual([DRIFT_ADDRESSES.ingress]);

    // Pause with a note: the page says so and shows no next run; resume brings it back.
    await page.goto(stackUrl);
    await page.getByRole('heading', { name }).waitFor();
    await page.getByLabel('Note (optional)').fill('freeze week');
    const paused = page.waitForResponse((r) => r.url().endsWith('/pause') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Pause schedule' }).click();
    expect((await paused).status()).toBe(200);
    await expect.poll(() => page.getByTestId('schedule-state').textContent()).toBe('paused: freeze week');
    expect(await page.getByTestId('next-run').textContent()).toBe('—');
    // The answer comes once the schedule says it is resumed (api/schedules.ts); the page then shows it.
    const resumed = page.waitForResponse(
      (r) => r.url().endsWith('/resume') && r.request().method() === 'POST',
    );
    await page.getByRole('button', { name: 'Resume schedule' }).click();
    expect((await resumed).status()).toBe(200);
    await expect.poll(() => page.getByTestId('schedule-state').textContent()).toBe('active');

    await page.getByRole('link', { name: 'All stacks' }).click();
    const row = page.locator(`tr[data-stack="${name}"]`);
    await row.waitFor();
    expect(await row.getByTestId('schedule-state').textContent()).toBe('active');
    await expectAccessible(page, 'stacks');
    await screenshot(page, 'stacks');
    expect(errors).toEqual([]);
    await context.close();

    // A developer reads the stack and the inbox, without the controls.
    const dev = await signedIn(tokens.developer, stackUrl.replace(api.url, ''));
    await dev.page.getByRole('heading', { name }).waitFor();
    expect(await dev.page.getByRole('button', { name: 'Run now' }).count()).toBe(0);
    await dev.page.goto(`${api.url}/inbox`);
    await dev.page.locator(`tr[data-item="${DRIFT_ADDRESSES.ingress} data.ingress"]`).waitFor();
    expect(await dev.page.getByRole('checkbox').count()).toBe(0);
    await dev.context.close();
    await bed.api.put(SG_WEB_DEMO.id, SG_WEB_DEMO);
  });

  it('shows what the code declares and what the cloud has, and reverts in the cloud from the inbox and from a session’s drift: each plan lists exactly its address, Apply puts it back', async () => {
    const created = await api.call('POST', '/api/v1/stacks', tokens.devops, {
      name: `web-revert-${Date.now()}`,
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-web',
      schedule: { cron: `${(new Date().getUTCMinutes() + 30) % 60} * * * *` },
    });
    expect(created.status).toBe(201);
    const stackId = (created.body as { stack_uuid: string }).stack_uuid;
    await bed.inject('ingress');
    await bed.inject('attribute');
    await triggerStackRun(api, h.client, tokens, stackId);
    const { context, page, errors } = await signedIn(tokens.devops, `/inbox?stack=${stackId}`);
    const item = page.locator(`tr[data-item="${DRIFT_ADDRESSES.ingress} data.ingress"]`);
    await item.waitFor();
    const rule8080 = { protocol: 'tcp', from_port: 8080, to_port: 8080, cidr_blocks: ['0.0.0.0/0'] };
    expect(JSON.parse((await item.getByTestId('declared').textContent()) ?? '')).toEqual(SG_WEB_DEMO.ingress);
    expect(JSON.parse((await item.getByTestId('actual').textContent()) ?? '')).toEqual([
      ...SG_WEB_DEMO.ingress,
      rule8080,
    ]);
    const replicas = page.locator(`tr[data-item="${DRIFT_ADDRESSES.attribute} data.replicas"]`);
    expect(await replicas.getByTestId('declared').textContent()).toBe('2');
    expect(await replicas.getByTestId('actual').textContent()).toBe('5');
    expect(await replicas.locator('td').first().textContent()).toBe('whitelisted');

    // Revert the opened rule: a session whose pinned plan holds that one address; the replica
    // change is listed beside it, not in it.
    await page.getByLabel(`Choose ${DRIFT_ADDRESSES.ingress} data.ingress`).check();
    await page.getByRole('button', { name: 'Revert in the cloud' }).click();
    await page.waitForURL(/\/sessions\/s-/);
    const change = page.locator(`tr[data-change="${DRIFT_ADDRESSES.ingress}"]`);
    await change.waitFor({ timeout: 120_000 });
    expect(await page.getByRole('table', { name: 'In this plan' }).locator('tbody tr').count()).toBe(1);
    expect(await change.locator('td').nth(1).textContent()).toBe('update');
    expect(await page.getByTestId('plan-targets').textContent()).toBe(
      `Planned with -target ${DRIFT_ADDRESSES.ingress}: nothing else is applied.`,
    );
    expect(await page.getByTestId('not-in-plan').textContent()).toContain(
      `${DRIFT_ADDRESSES.attribute} update`,
    );
    // A revert changes no code: there is no pull request to create.
    expect(await page.getByRole('button', { name: 'Create Pull Request' }).count()).toBe(0);
    await expectAccessible(page, 'revert-plan');
    await screenshot(page, 'revert-plan');
    await page.getByRole('button', { name: 'Apply the pinned plan' }).click();
    await expect
      .poll(() => page.getByTestId('round-status').nth(1).textContent(), { timeout: 120_000 })
      .toBe('completed');
    expect((await bed.api.get(SG_WEB_DEMO.id))?.ingress).toEqual(SG_WEB_DEMO.ingress);
    expect((await bed.api.get(APP_CONFIG.id))?.replicas).toBe(5);

    // A drift session's leftover — the replica count its exception rule leaves alone — reverted
    // from its page.
    const full = await api.call('POST', '/api/v1/drift/full', tokens.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-web',
      text: 'Reconcile everything.',
    });
    const sessionId = (full.body as { session_id: string }).session_id;
    await waitForSession(api, tokens.devops, sessionId, 1);
    await page.goto(`${api.url}/sessions/${sessionId}`);
    await page.getByRole('heading', { name: 'Drift found' }).waitFor();
    await page.getByRole('checkbox', { name: DRIFT_ADDRESSES.attribute }).check();
    await page.getByRole('button', { name: 'Revert in the cloud' }).click();
    const replicasChange = page.locator(`tr[data-change="${DRIFT_ADDRESSES.attribute}"]`);
    await replicasChange.waitFor({ timeout: 120_000 });
    expect(await page.getByRole('table', { name: 'In this plan' }).locator('tbody tr').count()).toBe(1);
    await page.getByRole('button', { name: 'Apply the pinned plan' }).click();
    await expect
      .poll(() => page.getByTestId('round-status').nth(2).textContent(), { timeout: 120_000 })
      .toBe('completed');
    expect((await bed.api.get(APP_CONFIG.id))?.replicas).toBe(2);
    expect(errors).toEqual([]);
    await context.close();
    await api.call('DELETE', `/api/v1/stacks/${stackId}`, tokens.devops);
  });
});
