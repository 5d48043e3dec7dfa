// The real stack of a test run (or a benchmark): a Temporal dev server in memory on free ports
// without UI, the object store, the metadata store, the git host, and one workflow bundle.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startEmbeddedDatabase } from '../../scripts/embedded/database';
import { startGitHost } from '../../scripts/embedded/git-host';
import { startObjectStore } from '../../scripts/embedded/object-store';
import { freePort } from '../../scripts/embedded/ports';
import { loadDevServerSpec, startDevServer } from '../../scripts/embedded/temporal-dev';
import { workflowsPath } from '../../worker/worker';

export interface TestStack {
  root: string;
  temporalAddress: string;
  namespace: string;
  s3Endpoint: string;
  bucket: string;
  gitHostUrl: string;
  gitReposDir: string;
  gitCaFile: string;
  databaseUrl: string;
  workflowBundlePath: string;
}

const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} };

export async function startTestStack(): Promise<{ stack: TestStack; stop: () => Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-test-'));
  const spec = {
    ...loadDevServerSpec(),
    port: await freePort(),
    http_port: await freePort(),
    db_filename: undefined,
    headless: true,
  };
  const [temporal, store, gitHost, db, bundle] = await Promise.all([
    startDevServer(spec, { dataDir: root }),
    startObjectStore({ directory: join(root, 's3'), bucket: 'kumoss-test' }),
    startGitHost({ reposDir: join(root, 'git'), certsDir: join(root, 'certs') }),
    startEmbeddedDatabase({}),
    bundleWorkflowCode({ workflowsPath, logger: silent }),
  ]);
  const workflowBundlePath = join(root, 'workflow-bundle.js');
  writeFileSync(workflowBundlePath, bundle.code);
  return {
    stack: {
      root,
      temporalAddress: temporal.address,
      namespace: 'default',
      s3Endpoint: store.endpoint,
      bucket: 'kumoss-test',
      gitHostUrl: gitHost.url,
      gitReposDir: gitHost.reposDir,
      gitCaFile: gitHost.caPath,
      databaseUrl: db.url,
      workflowBundlePath,
    },
    stop: async () => {
      await Promise.allSettled([temporal.stop(), store.close(), gitHost.close(), db.close()]);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
