// The request wizard and the session page's other paths in a real browser (Debian's Chromium):
// the mapping sidecar's answer skips the cloud and scope questions (null = ask); a failed session
// says it must be replaced and opens the wizard prefilled with its repository, cloud, scope and
// path; a Generate request runs as a generate round; a follow-up request sends only its text and
// runs as the session's next round; the views
// work with the keyboard alone and fit a laptop screen.
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWebBuild } from '../../scripts/web-build';
import { createDb, type Db } from '../../shared/infra/db';
import { findUserByToken } from '../../shared/infra/db/users';
import { sessionBranch } from '../../shared/ids';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { expectAccessible, launchBrowser, signIn } from '../support/browser';
import type { DriftTestBed } from '../support/drift-test-bed';
import { reply, startJsonLoopback, type JsonLoopback } from '../support/json-loopback';
import { newTestBed, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('web application: wizard, failed and follow-up sessions, keyboard (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let browser: Browser;
  let bed: DriftTestBed;
  let sidecar: JsonLoopback<'map'>;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    h = await temporalHarness('web-wizard-more');
    db = createDb(stack().databaseUrl);
    tokens = await roleTokens(db, `web-wizard-more-${Date.now()}`);
    // The mapping sidecar's catalogue knows one repository.
    sidecar = await startJsonLoopback<'map'>((req) =>
      String(req.body.repository_url).endsWith('/known.git')
        ? reply(200, { provider: 'gcp', scope_id: 'proj-known-123' }, 'map')
        : reply(200, { provider: null, scope_id: null }, 'map'),
    );
    api = await startTestApi(
      h,
      db,
      undefined,
      undefined,
      { enabled: true, url: sidecar.url },
      undefined,
      webDist,
    );
    browser = await launchBrowser();
    bed = await newTestBed();
  });
  afterAll(async () => {
    await browser?.close();
    await bed?.destroy();
    await sidecar?.close();
    api?.close();
    await db?.destroy();
    await h?.close();
  });

  const signedIn = (token: string, path: string, viewport = { width: 1280, height: 800 }) =>
    signIn(browser, api.url, token, path, viewport);

  /** The focused element: `input#<id>` or `a <text>`. */
  const focused = (page: Page) =>
    page.evaluate<string>(
      "(() => { const e = document.activeElement; return e ? (e.tagName === 'A' ? 'a ' + e.textContent : e.tagName.toLowerCase() + '#' + e.id) : ''; })()",
    );

  const fitsWidth = (page: Page) =>
    page.evaluate<boolean>('document.documentElement.scrollWidth <= document.documentElement.clientWidth');

  it('skips the cloud and scope questions when the mapping sidecar knows the repository', async () => {
    const { context, page, errors } = await signedIn(tokens.devops, '/new');
    await page.getByRole('heading', { name: 'New drift request' }).waitFor();
    await page.getByLabel('Repository URL').fill('https://git.example.com/platform/known.git');
    await expect.poll(() => page.getByTestId('mapped-cloud').textContent()).toContain('gcp');
    expect(await page.getByTestId('mapped-scope').textContent()).toContain('proj-known-123');
    expect(await page.locator('#cloud').count()).toBe(0);
    expect(await page.locator('#scope_id').count()).toBe(0);
    expect(sidecar.seen.at(-1)?.body).toMatchObject({
      repository_url: 'https://git.example.com/platform/known.git',
    });

    // An unknown repository: the sidecar is unsure, so the wizard asks.
    await page.getByLabel('Repository URL').fill('https://git.example.com/platform/other.git');
    await page.locator('#cloud').waitFor();
    await page.locator('#scope_id').waitFor();
    expect(await page.getByTestId('mapped-cloud').count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('offers a failed session’s replacement, prefilled with its repository, cloud, scope and path', async () => {
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no devops user');
    const sessionId = `s-failed-${randomUUID().slice(0, 8)}`;
    await db
      .insertInto('sessions')
      .values({
        session_id: sessionId,
        organization_uuid: devops.organization_uuid,
        created_by: devops.user_uuid,
        repository_url: 'https://git.example.com/platform/failed.git',
        cloud: 'azure',
        scope_id: 'sub-0042',
        iac_path: 'envs/west',
        state_project_id: `sp-${sessionId}`,
        status: 'FAILED',
        branch: sessionBranch(sessionId),
        in_flight: null,
      })
      .execute();
    const { context, page, errors } = await signedIn(tokens.devops, `/sessions/${sessionId}`);
    await page.getByText('it must be replaced by a new session').waitFor();
    expect(await page.getByRole('heading', { name: 'Follow-up request' }).count()).toBe(0);
    await page.getByRole('link', { name: 'Start a new session for this repository' }).click();
    await page.getByRole('heading', { name: 'New drift request' }).waitFor();
    expect(await page.getByLabel('Repository URL').inputValue()).toBe(
      'https://git.example.com/platform/failed.git',
    );
    expect(await page.locator('#cloud').inputValue()).toBe('azure');
    expect(await page.getByLabel('Scope id').inputValue()).toBe('sub-0042');
    expect(await page.getByLabel('IaC path (optional)').inputValue()).toBe('envs/west');
    expect(new URL(page.url()).pathname).toBe('/new');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('sends a Generate request from the wizard: a generate round, declined by the offline model with what it does carry out', async () => {
    const { context, page, errors } = await signedIn(tokens.devops, '/new');
    await page.getByRole('heading', { name: 'New drift request' }).waitFor();
    await page.getByLabel('Generate a change').check();
    expect(await page.locator('#text').getAttribute('placeholder')).toBe(
      'Add the tag CostCenter = cc-1234 to the bastion security group.',
    );
    await page.getByLabel('Repository URL').fill(bed.repoUrl);
    await page.getByLabel('Scope id').fill('scope-generate');
    await page.locator('#text').fill('Create an S3 bucket for the access logs');
    await page.getByRole('button', { name: 'Send request' }).click();
    await page.waitForURL(/\/sessions\/s-/);
    const round = page.locator('.rounds > li').first();
    await expect
      .poll(() => round.getByTestId('round-status').textContent(), { timeout: 120_000 })
      .toBe('uncompleted');
    expect(await round.locator('strong').first().textContent()).toBe('generate');
    expect(await round.locator('.hint').textContent()).toMatch(
      /^This request needs a language model: .* It carries out requests such as "add the tag Team = platform to /,
    );
    expect(errors).toEqual([]);
    await context.close();
  });

  it('sends a follow-up with only its text; it runs as the next round; sending waits while one runs', async () => {
    await bed.inject('ingress');
    const started = await api.call('POST', '/api/v1/drift/partial', tokens.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: 'scope-follow',
      text: 'Resolve the drift on security group sg-web-demo.',
    });
    const sessionId = started.body.session_id as string;
    await waitForSession(api, tokens.devops, sessionId, 1);
    const { context, page, errors } = await signedIn(tokens.devops, `/sessions/${sessionId}`);
    await page.getByRole('heading', { name: 'Follow-up request' }).waitFor();
    const send = page.getByRole('button', { name: 'Send follow-up' });
    expect(await send.isDisabled()).toBe(true); // no text yet
    await page.getByLabel('Full Drift Remediation').check();
    await page.locator('#follow-up-text').fill('Reconcile everything else.');
    await send.click();
    await expect.poll(() => page.locator('.rounds > li').count(), { timeout: 30_000 }).toBe(2);
    // While the round runs, the next request waits.
    await page.locator('#follow-up-running').waitFor();
    expect(await send.isDisabled()).toBe(true);
    // The second round is the follow-up: its text, its mode; it runs to its end.
    const second = page.locator('.rounds > li').nth(1);
    expect(await second.locator('.request').textContent()).toBe('Reconcile everything else.');
    expect(await second.locator('strong').first().textContent()).toBe('full');
    await expect
      .poll(() => second.getByTestId('round-status').textContent(), { timeout: 120_000 })
      .toMatch(/^(completed|uncompleted)$/);
    const detail = await api.call('GET', `/api/v1/sessions/${sessionId}`, tokens.devops);
    const rounds = detail.body.rounds as { kind: string; text?: string }[];
    expect(rounds.map((r) => [r.kind, r.text])).toEqual([
      ['partial', 'Resolve the drift on security group sg-web-demo.'],
      ['full', 'Reconcile everything else.'],
    ]);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('works with the keyboard alone and fits a laptop screen', async () => {
    const context = await browser.newContext({ viewport: { width: 1024, height: 700 } });
    const page = await context.newPage();
    await page.goto(`${api.url}/`);
    await page.getByLabel('Access token').waitFor();
    // Tab to the token field, type it, Enter signs in.
    for (let i = 0; i < 5 && (await focused(page)) !== 'input#token'; i++) await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('input#token');
    await page.keyboard.type(tokens.developer);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    expect(await fitsWidth(page)).toBe(true);
    // Tab to "New request" and open it with Enter.
    for (let i = 0; i < 10 && (await focused(page)) !== 'a New request'; i++)
      await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('a New request');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'New drift request' }).waitFor();
    expect(await fitsWidth(page)).toBe(true);
    // The developer's wizard: both modes disabled with the hint.
    expect(await page.getByRole('radio', { name: 'Partial Drift Remediation' }).isDisabled()).toBe(true);
    await expectAccessible(page, 'wizard (developer)');
    await context.close();
  });
});
