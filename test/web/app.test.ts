// The web application's other views in a real browser (Debian's Chromium) on the real API, store
// and object store: a round's artifacts rendered inline from their presigned URLs (report tables,
// highlighted diff, plan text, Markdown prompt) with script and markup planted in a request text, a
// resource name and the artifacts themselves never running; the admin panel (a user created with
// the token shown once, a lock set with a reason that then disables the merge button); a runner
// group's drift detection followed live to its plan and the chained repair; axe-core finding no
// serious or critical violation on any view. With KUMOSS_SCREENSHOTS=<dir> it saves the README's
// pictures there (`npm run screenshots`).
import { randomUUID } from 'node:crypto';
import type { Browser, BrowserContext, Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWebBuild } from '../../scripts/web-build';
import { createDb, type Db } from '../../shared/infra/db';
import { recordSession } from '../../shared/infra/db/sessions';
import { findUserByToken } from '../../shared/infra/db/users';
import { roundArtifactKey, sessionBranch } from '../../shared/ids';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { expectAccessible, launchBrowser, screenshot } from '../support/browser';
import { awsEnvironment, startRunnerBed, type RunnerBed } from '../support/runner-bed';
import {
  artifactStore,
  stack,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

/** Script planted in data: any of it running sets window.__pwned. */
const SCRIPT = `<script>window.__pwned='script'</script><img src=x onerror="window.__pwned='img'">`;

describe('web application: artifacts, admin panel, runner groups (Chromium)', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  /** The same application where apply needs a second person's approval (four eyes). */
  let fourEyes: TestApi;
  let browser: Browser;
  let bed: RunnerBed;
  let tokens: Record<'developer' | 'devops' | 'admin', string>;

  beforeAll(async () => {
    const webDist = await ensureWebBuild();
    bed = await startRunnerBed(stack().databaseUrl);
    h = await temporalHarness('web-app', testActivities({ runners: bed.deps }));
    db = createDb(stack().databaseUrl);
    tokens = await roleTokens(db, `web-app-${Date.now()}`);
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, webDist);
    fourEyes = await startTestApi(h, db, undefined, undefined, undefined, undefined, webDist, {
      orchestration: { apply_requires_approval: true },
    });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    api?.close();
    fourEyes?.close();
    await db?.destroy();
    await h?.close();
    await bed?.close();
  });

  /** A signed-in page; page errors and CSP refusals are collected. */
  const signedIn = async (token: string, path = '/', on: TestApi = api) => {
    const context: BrowserContext = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    // Console errors too (CSP refusals land there), except the 401 of "who is signed in?" before sign-in.
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().includes('status of 401')) problems.push(m.text());
    });
    page.on('dialog', (d) => {
      problems.push(`dialog: ${d.message()}`);
      void d.dismiss();
    });
    await page.goto(`${on.url}${path}`);
    await page.getByLabel('Access token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    /** Waits for `locator`; when it never shows, the error says what the page said instead. */
    const seen = (locator: Locator) =>
      locator.waitFor().catch(async (e: Error) => {
        const alerts = await page.getByRole('alert').allTextContents();
        throw new Error(`${e.message}\nalerts: ${alerts.join(' | ')}\nconsole: ${problems.join(' | ')}`);
      });
    return { context, page, problems, seen };
  };

  /**
   * A finished partial round of the devops user's organization, as the store and the object store
   * hold it: report, diff, plan text, prompt — with markup planted in the request, a resource name
   * and every artifact; the pull request open.
   */
  const plantedSession = async () => {
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no devops user');
    const sessionId = `s-web-${randomUUID().slice(0, 8)}`;
    const roundId = `r-${randomUUID().slice(0, 8)}`;
    await db
      .insertInto('sessions')
      .values({
        session_id: sessionId,
        organization_uuid: devops.organization_uuid,
        created_by: devops.user_uuid,
        repository_url: 'https://git.example.com/platform/infra.git',
        cloud: 'aws',
        scope_id: 'scope-web',
        iac_path: 'envs/prod',
        state_project_id: `sp-${sessionId}`,
        branch: sessionBranch(sessionId),
        in_flight: null,
      })
      .execute();
    const evil = `aws_security_group.web${SCRIPT}`;
    await recordSession(db, {
      sessionId,
      rounds: [
        {
          round_id: roundId,
          kind: 'partial',
          status: 'completed',
          text: `Resolve the drift on sg-web. ${SCRIPT}`,
          outcome: 'Partial',
          summary: `Reconciled one resource. ${SCRIPT}`,
        },
      ],
    });
    const store = artifactStore();
    const key = (name: string) => roundArtifactKey(sessionId, roundId, name);
    await store.putJson(key('drift-report.json'), {
      session_id: sessionId,
      round_id: roundId,
      mode: 'partial',
      summary: `One resource reconciled, one left. ${SCRIPT}`,
      outcome: 'Partial',
      remediated_resources: [{ address: 'aws_security_group.web', files: ['envs/prod/main.tf'] }],
      unreconciled_drift: [{ address: evil, attributes: ['ingress'], reason: `Needs a person. ${SCRIPT}` }],
      whitelisted_exceptions: [
        {
          address: 'aws_s3_bucket.logs',
          attributes: ['tags.Owner'],
          rule_id: 'owner-tag',
          reason: 'Set by finance.',
        },
      ],
      iterations: 1,
      branch: sessionBranch(sessionId),
      commit: 'a'.repeat(40),
    });
    await store.putText(
      key('iteration-1/group-0/changes.diff'),
      [
        'diff --git a/envs/prod/main.tf b/envs/prod/main.tf',
        '--- a/envs/prod/main.tf',
        '+++ b/envs/prod/main.tf',
        '@@ -1,4 +1,4 @@',
        ' resource "aws_security_group" "web" {',
        '-  description = "old"',
        `+  description = "${SCRIPT.replace(/"/g, '\\"')}"`,
        '   name        = "sg-web"',
        ' }',
        '',
      ].join('\n'),
      'text/x-diff',
    );
    await store.putText(
      key('iteration-1/plan.txt'),
      `  # ${evil} will be updated in-place\n  ~ resource "aws_security_group" "web" {}\n`,
    );
    await store.putText(
      key('prompt.md'),
      `# Resolve drift\n\nThe request: **${SCRIPT}**\n\n<iframe src="javascript:window.__pwned='iframe'"></iframe>\n\n[a link](javascript:window.__pwned='link')\n\n\`\`\`hcl\nresource "x" "y" {}\n\`\`\`\n`,
      'text/markdown; charset=utf-8',
    );
    await db
      .insertInto('pull_requests')
      .values({
        session_id: sessionId,
        provider: 'git_host',
        number: null,
        title: 'Reconcile drift',
        description: 'd',
        head: sessionBranch(sessionId),
        base: 'main',
        url: null,
        status: 'open',
        merge_commit: null,
        merged_at: null,
      })
      .execute();
    return { sessionId, roundId, evil };
  };

  it('renders a round’s artifacts inline from their presigned URLs, and planted script never runs', async () => {
    const { sessionId, evil } = await plantedSession();
    const { context, page, problems } = await signedIn(tokens.devops, `/sessions/${sessionId}`);
    await page.getByRole('heading', { name: `Session ${sessionId}` }).waitFor();

    // The report as tables.
    const unreconciled = page.getByRole('table', { name: 'Unreconciled drift' });
    await unreconciled.waitFor();
    expect(await unreconciled.locator('tbody td').first().textContent()).toBe(evil);
    expect(await page.getByRole('table', { name: 'Remediated resources' }).textContent()).toContain(
      'envs/prod/main.tf',
    );
    expect(await page.getByRole('table', { name: 'Whitelisted exceptions' }).textContent()).toContain(
      'owner-tag',
    );
    expect(await page.getByTestId('report-outcome').textContent()).toBe('Partial');

    // The diff through diff2html, highlighted (highlight.js spans inside the added line).
    const diff = page.locator('.d2h-file-wrapper');
    await diff.waitFor();
    expect(await diff.locator('.d2h-file-name').first().textContent()).toContain('envs/prod/main.tf');
    expect(await diff.locator('.d2h-ins .d2h-code-line-ctn').first().textContent()).toContain(
      "<script>window.__pwned='script'</script>",
    );
    await expect
      .poll(() => diff.locator('.hljs-string, .hljs-keyword, .hljs-attr').count())
      .toBeGreaterThan(0);

    // Plan text and the Markdown prompt, opened by the reader.
    await page.locator('[data-artifact="iteration-1/plan.txt"] summary').click();
    await expect
      .poll(() => page.locator('[data-artifact="iteration-1/plan.txt"] pre').textContent())
      .toContain(`# ${evil} will be updated in-place`);
    await page.locator('[data-artifact="prompt.md"] summary').click();
    const prompt = page.locator('[data-artifact="prompt.md"] .markdown');
    await prompt.locator('h1').waitFor();
    expect(await prompt.locator('h1').textContent()).toBe('Resolve drift');
    expect(await prompt.locator('iframe').count()).toBe(0);
    const href = await prompt.locator('a').first().getAttribute('href');
    expect(href ?? '').not.toMatch(/^javascript:/i);

    // The binary plan is described, never offered as a download; no link anywhere goes to the store.
    expect(await page.locator('a[download]').count()).toBe(0);
    const storeOrigin = new URL(stack().s3Endpoint).origin;
    const hrefs = await page
      .locator('a')
      .evaluateAll((as) => as.map((a) => (a as unknown as { href: string }).href));
    expect(hrefs.filter((x) => x.startsWith(storeOrigin))).toEqual([]);

    // Nothing planted ran or became an element: no script, image or frame from the data.
    expect(await page.evaluate<unknown>('window.__pwned')).toBeUndefined();
    expect(await page.locator('main img, main iframe, main script').count()).toBe(0);
    expect(problems).toEqual([]);
    await expectAccessible(page, 'session with artifacts');
    await context.close();
  });

  it('lets an admin create a user (token shown once) and lock a session, whose merge button then says why', async () => {
    const { sessionId } = await plantedSession();
    const { context, page, problems } = await signedIn(tokens.admin, '/admin');
    await page.getByRole('heading', { name: 'Admin' }).waitFor();
    await expectAccessible(page, 'admin panel');

    const name = `web-made-${Date.now()}`;
    await page.getByLabel('Name').fill(name);
    await page.locator('#new-user-role').selectOption('developer');
    await page.getByRole('button', { name: 'Create user' }).click();
    const token = (await page.getByTestId('new-token').textContent({ timeout: 10_000 })) ?? '';
    expect(token).toMatch(/^kms_/);
    expect(((await api.call('GET', '/api/v1/auth/me', token)).body.user as { role: string }).role).toBe(
      'developer',
    );
    await page.locator(`tr[data-user="${name}"]`).waitFor();
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByTestId('new-token').count()).toBe(0);

    // Promote the new user, then revoke their token.
    await page.getByLabel(`Role of ${name}`).selectOption('devops');
    await expect
      .poll(
        async () => ((await api.call('GET', '/api/v1/auth/me', token)).body.user as { role?: string })?.role,
      )
      .toBe('devops');
    await page.locator(`tr[data-user="${name}"]`).getByRole('button', { name: 'Revoke token' }).click();
    await expect.poll(() => page.locator(`tr[data-user="${name}"]`).textContent()).toContain('Revoked');
    expect((await api.call('GET', '/api/v1/auth/me', token)).status).toBe(401);

    // A lock with a reason.
    await page.getByLabel('Session id').fill(sessionId);
    await page.getByLabel('Reason').fill('Change freeze until the audit ends.');
    await page.getByRole('button', { name: 'Lock session' }).click();
    await page.locator(`tr[data-lock="${sessionId}"]`).waitFor();
    await screenshot(page, 'admin-panel');
    await context.close();

    // The devops user sees the merge button disabled, with the lock's reason.
    const dev = await signedIn(tokens.devops, `/sessions/${sessionId}`);
    const merge = dev.page.getByRole('button', { name: 'Merge pull request (merge only, no apply)' });
    await merge.waitFor();
    expect(await merge.isDisabled()).toBe(true);
    expect(await dev.page.locator('#merge-locked').textContent()).toBe(
      'Merging is blocked while the session is locked: Change freeze until the audit ends.',
    );
    expect(await dev.page.getByTestId('session-lock').textContent()).toBe(
      'Locked: Change freeze until the audit ends.',
    );
    expect([...problems, ...dev.problems]).toEqual([]);
    await dev.context.close();
  });

  it('shows a pinned plan’s impact banner and compliance findings as text, and blocks Apply on a deny finding', async () => {
    const { sessionId } = await plantedSession();
    const evil = `aws_security_group.db${SCRIPT}`;
    await db
      .updateTable('sessions')
      .set({
        pinned_plan: JSON.stringify({
          round_id: 'r-generate',
          key: 'k',
          sha256: 'a'.repeat(64),
          commit: 'b'.repeat(40),
          state_serial: 7,
          state_lineage: 'l',
          impact: {
            create: 1,
            update: 2,
            replace: 1,
            destroy: 1,
            destroyed: [evil],
            replaced: ['aws_instance.web'],
            changes: [
              { address: 'aws_instance.api', action: 'create' },
              { address: 'aws_instance.web', action: 'replace' },
              { address: evil, action: 'destroy' },
              { address: 'aws_security_group.app', action: 'update' },
              { address: 'aws_security_group.web', action: 'update' },
            ],
            targets: null,
            not_in_plan: [{ address: `aws_s3_bucket.logs${SCRIPT}`, action: 'update' }],
          },
          compliance: {
            passed: false,
            deny: [`${evil}: ingress from the whole internet on admin port 22`],
            warn: [],
            report_key: 'c',
            policies: 'policies/aws',
          },
        }),
      } as never)
      .where('session_id', '=', sessionId)
      .execute();
    const { context, page, problems } = await signedIn(tokens.devops, `/sessions/${sessionId}`);
    await page.getByTestId('impact-banner').waitFor();
    expect(await page.getByTestId('impact-banner').textContent()).toBe(
      '1 to create · 2 to update · 1 to replace · 1 to destroy',
    );
    // Every address with its action, and what the plan leaves out — all as text.
    const rows = page.getByRole('table', { name: 'In this plan' }).locator('tbody tr');
    expect(await rows.count()).toBe(5);
    expect(await rows.nth(2).locator('td').allTextContents()).toEqual([evil, 'destroy']);
    expect(await page.getByTestId('plan-targets').textContent()).toBe('Planned on the whole root.');
    expect(await page.getByTestId('not-in-plan').textContent()).toBe(
      `Not in this plan: 1 resource would change — never applied with it:aws_s3_bucket.logs${SCRIPT} update`,
    );
    expect(await page.getByTestId('compliance').textContent()).toContain(
      '1 deny-level finding(s) — apply is blocked',
    );
    expect(await page.getByRole('button', { name: 'Apply the pinned plan' }).isDisabled()).toBe(true);
    expect(await page.evaluate<unknown>('window.__pwned')).toBeUndefined();
    expect(problems).toEqual([]);
    await context.close();
  });

  it('asks for a second person’s approval before Apply when four eyes are on: not the author’s, then an admin’s', async () => {
    const { sessionId } = await plantedSession();
    const devops = await findUserByToken(db, tokens.devops);
    await db
      .updateTable('sessions')
      .set({
        pinned_plan: JSON.stringify({
          round_id: 'r-generate',
          key: 'k',
          sha256: 'c'.repeat(64),
          commit: 'd'.repeat(40),
          state_serial: 3,
          state_lineage: 'l',
          impact: { create: 0, update: 1, replace: 0, destroy: 0, destroyed: [], replaced: [] },
        }),
      } as never)
      .where('session_id', '=', sessionId)
      .execute();
    // The devops user started the generate round: the plan's lock names them.
    await db
      .insertInto('session_locks')
      .values({
        session_id: sessionId,
        locked_by: devops?.user_uuid ?? null,
        reason: 'plan pinned',
        kind: 'plan',
      })
      .execute();

    const author = await signedIn(tokens.devops, `/sessions/${sessionId}`, fourEyes);
    await author.page.getByTestId('plan-approval').waitFor();
    expect(await author.page.getByTestId('plan-approval').textContent()).toContain(
      'Applying needs a second devops or admin to approve this plan',
    );
    expect(await author.page.getByRole('button', { name: 'Apply the pinned plan' }).isDisabled()).toBe(true);
    await author.page.getByRole('button', { name: 'Approve the pinned plan' }).click();
    await author.page.getByRole('alert').getByText('You pinned this plan').waitFor();
    expect(await author.page.getByRole('button', { name: 'Apply the pinned plan' }).isDisabled()).toBe(true);
    expect(author.problems.filter((p) => !p.includes('status of 403'))).toEqual([]);
    await author.context.close();

    const admin = await signedIn(tokens.admin, `/sessions/${sessionId}`, fourEyes);
    await admin.page.getByRole('button', { name: 'Approve the pinned plan' }).click();
    await admin.page.getByText(/^Approved by admin-/).waitFor();
    expect(await admin.page.getByRole('button', { name: 'Approve the pinned plan' }).count()).toBe(0);
    expect(await admin.page.getByRole('button', { name: 'Apply the pinned plan' }).isDisabled()).toBe(false);
    expect(admin.problems).toEqual([]);
    await admin.context.close();
  });

  it('follows a runner group’s drift detection live to its plan, then the repair it starts', async () => {
    const { context, page, problems, seen } = await signedIn(tokens.devops, '/runners');
    await page.getByRole('heading', { name: 'Runner groups', level: 1 }).waitFor();
    // The view settled (both lists loaded) before anything is typed into it.
    await seen(page.getByText('No runner group yet.'));
    await seen(page.getByText('No cloud connection yet.'));
    // A connection and a group made in the views (the group's environment, never provisioned: all drifted).
    const connName = `aws-web-${randomUUID().slice(0, 6)}`;
    await page.locator('#conn-name').fill(connName);
    await page.locator('#conn-region').fill('eu-central-1');
    await page.getByRole('button', { name: 'Add connection' }).click();
    await seen(page.getByRole('cell', { name: connName }));
    const groupName = `group-web-${randomUUID().slice(0, 6)}`;
    await page.locator('#new-group-name').fill(groupName);
    await page.locator('#new-group-connection').selectOption({ label: `${connName} (aws eu-central-1)` });
    // No registry pull secret: the repair can create everything the group needs.
    const { pull_secret: _, ...environment } = awsEnvironment();
    await page.locator('#new-group-environment').fill(JSON.stringify(environment, null, 2));
    await expectAccessible(page, 'runner groups');
    await page.getByRole('button', { name: 'Create runner group' }).click();
    await page.getByRole('heading', { name: `Runner group ${groupName}` }).waitFor();
    await expectAccessible(page, 'runner group');

    // Auto-apply is off by default and says what it does.
    const auto = page.getByLabel('Repair automatically (auto-apply)');
    expect(await auto.isChecked()).toBe(false);
    expect(await page.locator('#auto-apply-warning').textContent()).toContain('changes real infrastructure');
    await page.getByRole('button', { name: 'Detect drift' }).click();
    await page.getByRole('heading', { name: 'runner.environment-drift-detect' }).waitFor();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 60_000 })
      .toBe('COMPLETED');
    expect(await page.getByTestId('plan-status').textContent()).toBe('drifted');
    expect(await page.getByRole('table', { name: 'Actions needed' }).textContent()).toContain('ecs_cluster');
    expect(await page.getByTestId('drift-summary').textContent()).toMatch(/\d+ drifted/);
    await screenshot(page, 'runner-detection');
    await expectAccessible(page, 'runner run');

    // The repair of that plan, followed the same way.
    await page.getByRole('button', { name: 'Repair this plan' }).click();
    await page.getByRole('heading', { name: 'runner.environment-drift-repair' }).waitFor();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 90_000 })
      .toBe('COMPLETED');
    expect(await page.getByTestId('dag-status').textContent()).toBe('completed');
    expect(problems).toEqual([]);
    await context.close();

    // A developer may detect, not auto-apply.
    const dev = await signedIn(tokens.developer, '/runners');
    await dev.page.getByRole('link', { name: groupName }).click();
    expect(await dev.page.getByLabel('Repair automatically (auto-apply)').isDisabled()).toBe(true);
    await dev.context.close();
  });

  it('passes axe-core on the sign-in page, the session list and the wizard', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${api.url}/`);
    await page.getByLabel('Access token').waitFor();
    await expectAccessible(page, 'sign-in');
    await context.close();
    const { context: c2, page: p2 } = await signedIn(tokens.devops, '/');
    await p2.getByRole('heading', { name: 'Sessions' }).waitFor();
    await expectAccessible(p2, 'sessions');
    await p2.getByRole('link', { name: 'New request' }).click();
    await p2.getByRole('heading', { name: 'New drift request' }).waitFor();
    await p2.getByLabel('Repository URL').fill('https://git.example.com/platform/infra.git');
    await p2.getByLabel('Scope id').fill('scope-web');
    await p2.getByLabel('Request', { exact: true }).fill('Resolve the drift on security group sg-web-demo.');
    await expectAccessible(p2, 'wizard');
    await screenshot(p2, 'wizard');
    await c2.close();
  });
});
