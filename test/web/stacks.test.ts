// Stacks and the drift inbox in a real browser (Debian's Chromium) on the real API, worker and
// drift test bed: a devops registers a stack in the form, sees its schedule state and next run,
// runs it now and watches the run land in the table; drift injected between runs shows up in the
// inbox, where choosing the item opens a partial drift session on exactly it; pausing with a note
// says so on the page and hides the next run, resuming brings it back; a developer reads it all
// without the controls; axe-core finds no serious or critical violation on the three views.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWebBuild } from '../../scripts/web-build';
import { createDb, type Db } from '../../shared/db';
import { roundArtifactKey } from '../../shared/ids';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { expectAccessible, launchBrowser, signIn, screenshot } from '../support/browser';
import { DRIFT_ADDRESSES, SG_WEB_DEMO, type DriftTestBed } from '../support/drift-test-bed';
import { artifactStore, newTestBed, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('web application: stacks and the drift inbox (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let browser: Browser;
  let bed: DriftTestBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    h = await temporalHarness('web-stacks');
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
  });

  const signedIn = (token: string, path: string) => signIn(browser, api.url, token, path);

  /** Clicks "Run now" and waits for one more finished run row than there were. */
  const runNow = async (page: Page) => {
    const rows = page.getByRole('table', { name: 'Detection runs' }).locator('tbody tr');
    const before = await rows.count();
    // A trigger that comes while the previous run's workflow is still closing is skipped (overlap
    // policy skip): asked again until the run shows up.
    for (let attempt = 0; ; attempt++) {
      await page.getByRole('button', { name: 'Run now' }).click();
      try {
        await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(before + 1);
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
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
    expect(await item.locator('td').nth(4).textContent()).toBe('update');
    await expectAccessible(page, 'inbox');
    await screenshot(page, 'inbox');
    const open = page.getByRole('button', { name: 'Open a partial drift session on the chosen items' });
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
    await page.getByRole('button', { name: 'Pause schedule' }).click();
    await expect.poll(() => page.getByTestId('schedule-state').textContent()).toBe('paused: freeze week');
    expect(await page.getByTestId('next-run').textContent()).toBe('—');
    await page.getByRole('button', { name: 'Resume schedule' }).click();
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
});
