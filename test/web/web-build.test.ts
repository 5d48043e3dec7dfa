// The web application `npm start` serves is React's production build, whoever builds it: the test
// suite's global setup builds it from vitest's process, whose NODE_ENV is `test` (a build there was
// React's development bundle — larger, slower, its JSX of development — served by the next start).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureWebBuild } from '../../scripts/web-build';

describe('the web build', () => {
  const out = mkdtempSync(join(tmpdir(), 'kumoss-web-build-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('is the production build when the building process is a test run', async () => {
    expect(process.env.NODE_ENV).toBe('test');
    expect(await ensureWebBuild({ outDir: out })).toBe(out);
    expect(existsSync(join(out, 'index.html'))).toBe(true);
    const scripts = readdirSync(join(out, 'assets'))
      .filter((f) => f.endsWith('.js'))
      .map((f) => readFileSync(join(out, 'assets', f), 'utf8'))
      .join('\n');
    // React's production build reports its errors by number; its development JSX calls jsxDEV
    // at every element (hundreds of times; a library's option of that name, a few).
    expect(scripts).toContain('Minified React error');
    expect(scripts.split('jsxDEV').length - 1).toBeLessThan(20);
  });
});
