// Debian's Chromium driven by playwright-core (Playwright cannot download its own browsers here):
// launched by executablePath; root needs --no-sandbox. Setup installs the `chromium` package.
import { execFileSync } from 'node:child_process';
import { chromium, type Browser } from 'playwright-core';

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
