// Builds the web application (web/ → web/dist) when the build is missing or older than its
// sources: the API types from the OpenAPI document first, then `vite build`. `npm start` and the
// browser tests call it; `npm run web:build` forces it.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../shared/infra/config';

export const webDir = join(projectRoot, 'web');
export const webDist = join(webDir, 'dist');

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((n) => newest(join(path, n))));
}

/** True when web/dist is missing or a source (or the API's OpenAPI document) is newer. */
export function webBuildStale(): boolean {
  const built = join(webDist, 'index.html');
  if (!existsSync(built)) return true;
  const sources = [
    join(webDir, 'src'),
    join(webDir, 'index.html'),
    join(webDir, 'vite.config.ts'),
    // The API's document: api/openapi.ts and the operations the route modules declare, with the
    // contracts their schemas come from.
    join(projectRoot, 'api'),
    join(projectRoot, 'shared', 'contracts.ts'),
    join(projectRoot, 'shared', 'stack-contracts.ts'),
    join(projectRoot, 'shared', 'runner-contracts.ts'),
  ];
  return Math.max(...sources.map(newest)) > statSync(built).mtimeMs;
}

export async function ensureWebBuild(
  /** `outDir`: build there instead of web/dist (forced). */
  opts: { force?: boolean; log?: (m: string) => void; outDir?: string } = {},
): Promise<string> {
  const outDir = opts.outDir ?? webDist;
  if (!opts.force && !opts.outDir && !webBuildStale()) return webDist;
  const t0 = Date.now();
  if (process.env.NODE_ENV !== undefined && process.env.NODE_ENV !== 'production') {
    // Vite builds React's development bundle (larger and slower; the JSX of development) when the
    // process's NODE_ENV says so — vitest's is `test` — and the next `npm start` would serve it: a
    // process of its own builds for production.
    await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(projectRoot, 'scripts', 'web-build.ts'), outDir],
      {
        cwd: projectRoot,
        env: { ...process.env, NODE_ENV: 'production' },
      },
    );
    opts.log?.(`web application built in ${((Date.now() - t0) / 1000).toFixed(1)}s -> ${outDir}`);
    return outDir;
  }
  // Loaded only to build (vite and the API's document take seconds to import): a start whose
  // build is current does not pay for them.
  const [{ build }, { renderWebTypes }] = await Promise.all([import('vite'), import('./web-types')]);
  // Written only when the document changed: a test compares the committed file while builds run.
  const types = join(webDir, 'src', 'api', 'schema.d.ts');
  const rendered = await renderWebTypes();
  if (!existsSync(types) || readFileSync(types, 'utf8') !== rendered) writeFileSync(types, rendered);
  await build({
    configFile: join(webDir, 'vite.config.ts'),
    logLevel: 'warn',
    ...(outDir === webDist ? {} : { build: { outDir, emptyOutDir: true } }),
  });
  opts.log?.(`web application built in ${((Date.now() - t0) / 1000).toFixed(1)}s -> ${outDir}`);
  return outDir;
}

// `npm run web:build` (to web/dist), or to the directory given.
if (process.argv[1]?.endsWith('web-build.ts')) {
  const to = process.argv[2];
  await ensureWebBuild({ force: true, log: console.log, ...(to ? { outDir: to } : {}) });
}
