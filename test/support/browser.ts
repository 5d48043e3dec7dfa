// Debian's Chromium driven by playwright-core (Playwright cannot download its own browsers here):
// launched by executablePath; root needs --no-sandbox. Setup installs the `chromium` package.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';

export function chromiumPath(): string {
  const fromEnv = process.env.KUMOSS_CHROMIUM_BIN;
  if (fromEnv) return fromEnv;
  try {
    return execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], {
      encoding: 'utf8',
    }).trim();
  } catch {
    throw new Error(
      "Chromium is not installed: the browser tests need Debian's chromium package (setup installs it as root; otherwise run `apt-get update && apt-get install -y chromium`).",
    );
  }
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}

/** With KUMOSS_SCREENSHOTS=<dir> (`npm run screenshots`), saves the page as <dir>/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.KUMOSS_SCREENSHOTS;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/** axe-core on the page as it stands: no serious or critical violation. */
export async function expectAccessible(page: Page, view: string): Promise<void> {
  const result = await new AxeBuilder({ page }).analyze();
  const bad = result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${view}: ${v.id} (${v.impact}) ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect(bad).toEqual([]);
}

/** A new browser context signed in with `token` at `baseUrl + path`; page errors are collected. */
export async function signIn(
  browser: Browser,
  baseUrl: string,
  token: string,
  path: string,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${baseUrl}${path}`);
  await page.getByLabel('Access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  return { context, page, errors };
}
