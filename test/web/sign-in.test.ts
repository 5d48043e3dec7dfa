// The web application in a real browser (Debian's Chromium) on the real API: sign in with a token,
// the organization's sessions listed, the session cookie out of reach of script, sign-out revokes
// it; a wrong token is refused in words; the request wizard (drift modes disabled below devops, the
// URL checked as it is typed) and a session whose round's statuses arrive live, then its pull
// request created and merged from the results view; markup planted in the request stays text.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { createDb, type Db } from '../../shared/infra/db';
import { ensureWebBuild } from '../../scripts/web-build';
import { roleTokens, startTestApi, type TestApi, testUser } from '../support/api';
import type { DriftTestBed } from '../support/drift-test-bed';
import { expectAccessible, launchBrowser, screenshot } from '../support/browser';
import { newTestBed, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('web application: sign-in and my sessions (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let browser: Browser;
  let token: string;

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    h = await temporalHarness('web-sign-in');
    db = createDb(stack().databaseUrl);
    token = (
      await testUser(db, {
        name: `devops-web-${Date.now()}`,
        role: 'devops',
        organization: `web-${Date.now()}`,
      })
    ).token;
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, webDist);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  it('signs in with a token, lists the sessions, keeps the cookie from script, and signs out for good', async () => {
    const started = await api.call('POST', '/api/v1/drift/full', token, {
      repository_url: `${stack().gitHostUrl}/web-missing.git`,
      cloud: 'aws',
      scope_id: 'scope-web',
      text: 'Reconcile everything.',
    });
    const sessionId = started.body.session_id as string;
    const context = await browser.newContext();
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${api.url}/`);

    await page.getByLabel('Access token').fill('kms_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toBe('The token is not valid.');

    await page.getByLabel('Access token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    const row = page.locator(`tr[data-session="${sessionId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('web-missing.git');
    expect(await page.getByLabel('Signed in as').textContent()).toMatch(/devops/);

    // The credential is an httpOnly cookie: script on the page cannot read it, nor is the token kept.
    expect(await page.evaluate<string>('document.cookie')).not.toContain('kumoss_session');
    expect(
      await page.evaluate<string>(
        'JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })',
      ),
    ).not.toContain(token);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'kumoss_session', httpOnly: true, sameSite: 'Strict' });

    // A shared URL opens the same view.
    await page.goto(`${api.url}/sessions`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Access token').waitFor();
    const reused = await fetch(`${api.url}/api/v1/auth/me`, {
      headers: { cookie: `kumoss_session=${cookie?.value ?? ''}` },
    });
    expect(reused.status).toBe(401);

    expect(pageErrors).toEqual([]);
    await context.close();
  });
});

describe('web application: the request wizard and a live session (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let browser: Browser;
  let bed: DriftTestBed;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    h = await temporalHarness('web-wizard');
    db = createDb(stack().databaseUrl);
    Object.assign(tokens, await roleTokens(db, `web-wizard-${Date.now()}`));
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

  const signedIn = async (token: string) => {
    const context = await browser.newContext();
    // Every text the first round's status shows, in order, as the page changes it.
    await context.addInitScript(`
      window.__seen = [];
      new MutationObserver(() => {
        const el = document.querySelector('[data-testid=round-status]');
        const text = el ? el.textContent : null;
        if (text && window.__seen[window.__seen.length - 1] !== text) window.__seen.push(text);
      }).observe(document, { subtree: true, childList: true, characterData: true });
    `);
    const page = await context.newPage();
    await page.goto(`${api.url}/new`);
    await page.getByLabel('Access token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'New drift request' }).waitFor();
    return { context, page };
  };

  it('shows every mode — both drift modes and Generate — disabled to a developer, with the seed’s hint', async () => {
    const { context, page } = await signedIn(tokens.developer ?? '');
    for (const name of ['Partial Drift Remediation', 'Full Drift Remediation', 'Generate a change']) {
      expect(await page.getByRole('radio', { name }).isDisabled()).toBe(true);
    }
    expect(await page.locator('#mode-hint').textContent()).toBe('Requires the devops operation role.');
    expect(await page.getByRole('button', { name: 'Send request' }).isDisabled()).toBe(true);
    await context.close();
  });

  it('checks the URL as it is typed, sends a partial request, shows the round’s statuses live to completion, creates and merges the pull request; planted markup stays text', async () => {
    await bed.inject('ingress');
    const { context, page } = await signedIn(tokens.devops ?? '');
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.getByLabel('Repository URL').fill('http://insecure.example/infra.git');
    expect(await page.locator('#repository_url-problem').textContent()).toBe(
      'Repository URL must use https://.',
    );
    await page.getByLabel('Repository URL').fill(bed.repoUrl);
    expect(await page.locator('#repository_url-problem').textContent()).toBe('');
    await page.getByLabel('Scope id').fill('scope-web');
    const planted =
      'Resolve the drift on security group sg-web-demo. <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
    await page.getByLabel('Request', { exact: true }).fill(planted);
    await page.getByRole('button', { name: 'Send request' }).click();
    await page.getByRole('heading', { name: /^Session s-/ }).waitFor();

    // Statuses arrive over the event stream while the round runs (recorded by an observer the page
    // got before it loaded), then it completes.
    await page.waitForFunction(
      () => ((globalThis as unknown as { __seen?: string[] }).__seen ?? []).length > 0,
      null,
      { timeout: 60_000 },
    );
    await screenshot(page, 'live-session');
    await page.waitForFunction(
      () => ((globalThis as unknown as { __seen?: string[] }).__seen ?? []).includes('completed'),
      null,
      { timeout: 120_000 },
    );
    const seen = await page.evaluate<string[]>('window.__seen');
    expect(seen[seen.length - 1]).toBe('completed');
    expect(seen.some((s) => ['started', 'filtering', 'generating', 'validating', 'report'].includes(s))).toBe(
      true,
    );
    // The outcome comes with the session's record of the round's end, after the round's own last
    // event: under a loaded suite that can be seconds later.
    await expect
      .poll(() => page.locator('.rounds li').first().textContent(), { timeout: 30_000 })
      .toContain('Succeeded');

    // The round's report as tables and its code change as a diff, inline.
    const remediated = page.getByRole('table', { name: 'Remediated resources' });
    await remediated.waitFor();
    expect(await remediated.locator('tbody tr').count()).toBeGreaterThan(0);
    expect(await remediated.textContent()).toContain('rest_object.sg_web_demo');
    await page.locator('.d2h-file-wrapper').first().waitFor();
    expect(await page.locator('.d2h-ins .d2h-code-line-ctn').count()).toBeGreaterThan(0);
    await screenshot(page, 'report-and-diff');
    await expectAccessible(page, 'live session with its report');

    // The planted markup is shown as the text it is, and none of it ran.
    expect(await page.locator('.request').first().textContent()).toBe(planted);
    expect(await page.evaluate<unknown>('window.__pwned')).toBeUndefined();
    expect(await page.locator('.rounds img').count()).toBe(0);

    // The results view: create the pull request, merge it (merge only, no apply), the session ends.
    await page.getByRole('button', { name: 'Create Pull Request' }).click();
    await expect
      .poll(() => page.getByTestId('pull-request').textContent({ timeout: 60_000 }))
      .toBe('Branch merge into main · open');
    await page.getByRole('button', { name: 'Merge pull request (merge only, no apply)' }).click();
    await page.getByText('Merged: this drift session has ended.').waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('session-status').textContent()).toBe('MERGED');
    expect(pageErrors).toEqual([]);
    await context.close();
  });
});
