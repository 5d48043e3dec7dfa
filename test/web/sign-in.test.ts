// The web application in a real browser (Debian's Chromium) on the real API: sign in with a token,
// the organization's sessions listed, the session cookie out of reach of script, sign-out revokes
// it; a wrong token is refused in words.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { createDb, type Db } from '../../shared/db';
import { createUser } from '../../shared/db/users';
import { ensureWebBuild } from '../../scripts/web-build';
import { startTestApi, type TestApi } from '../support/api';
import { launchBrowser } from '../support/browser';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

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
      await createUser(db, {
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
