// The real stack of a test run (or a benchmark): a Temporal dev server in memory on free ports
// without UI, the object store, the metadata store, the git host, and one workflow bundle.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { RunnerDeps } from '../../activities/runners';
import { ArtifactStore, createS3Client, storageCredentials } from '../../shared/infra/object-store';
import { ManagedState, type ManagedStateConfig } from '../../activities/managed-state';
import type { EngineDeps } from '../../activities/drift-detection';
import { EngineSlots } from '../../activities/engine-slots';
import { SECRET_MARKER } from './secret-scan';
import { GitAccess } from '../../activities/git-access';
import { secretBoxFromEnv } from '../../shared/infra/secret-box';
import { GitClient } from '../../activities/git';
import type { GiteaPullRequests } from '../../activities/gitea';
import type { GitHubPullRequests } from '../../activities/github';
import { OfflineModel } from '../../activities/model/offline';
import type { ModelProvider } from '../../activities/model/port';
import { PromptCatalogue } from '../../activities/prompt-catalogue';
import { RoundWorkspaces, StackWorkspaces } from '../../activities/workspace';
import { cliConfigPath, providerMirrorDir, toolPath } from '../../shared/infra/tools.mjs';
import { EngineSandbox } from '../../activities/sandbox';
import { CloudCredentials } from '../../activities/cloud-credentials';
import { STSClient } from '@aws-sdk/client-sts';
import { testCloudDir, testEgressAllowed } from './test-cloud';
import { DEFAULT_GO_MEMORY_LIMIT_MIB, projectRoot } from '../../shared/infra/config';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { artifactIndex } from '../../shared/infra/db/artifacts';
import { startAwsEmulator } from '../../scripts/embedded/aws-emulator';
import { startGitHost } from '../../scripts/embedded/git-host';
import { startObjectStore } from '../../scripts/embedded/object-store';
import { freePort } from '../../scripts/embedded/ports';
import { startPostgres } from '../../scripts/embedded/postgres';
import { startTemporalCluster } from '../../scripts/embedded/temporal-cluster';
import { loadDevServerSpec, startDevServer } from '../../scripts/embedded/temporal-dev';
import { createWorker, detectionsFor, workflowsPath } from '../../worker/worker';
import type { TemporalTarget } from '../../shared/infra/temporal-connection';

export interface TestStack {
  root: string;
  temporalAddress: string;
  namespace: string;
  s3Endpoint: string;
  bucket: string;
  gitHostUrl: string;
  gitReposDir: string;
  gitCaFile: string;
  /** Kumoss's metadata store: the `kumoss` role's URL of the `kumoss` database. */
  databaseUrl: string;
  /** The `postgres` superuser's URL of that PostgreSQL server (for tests that make databases). */
  postgresUrl: string;
  workflowBundlePath: string;
  /** moto_server: the AWS APIs behind the kumoss/aws provider of the real-root test beds. */
  awsEndpoint: string;
  /** Set on the cluster tier: Temporal is a four-process cluster on a real PostgreSQL server. */
  cluster?: {
    /** The Temporal service processes' ids, by service. */
    pids: Record<string, number>;
  };
}

/**
 * Which Temporal a test run gets: `dev` — `temporal server start-dev` (the default); `cluster` —
 * the Temporal server's four services on PostgreSQL (npm run test:cluster). Kumoss's metadata is
 * on a real PostgreSQL server in both, as under `npm start`.
 */
export type StackShape = 'dev' | 'cluster';

/** Temporal and the metadata store of one shape; both put Kumoss's metadata on a real PostgreSQL. */
async function startTemporalAndStore(shape: StackShape, root: string) {
  const pg = await startPostgres({
    dataDir: join(root, 'postgres'),
    port: await freePort(),
    superuserPassword: 'postgres-test',
    throwaway: true,
  });
  const user = { user: 'kumoss', password: 'kumoss-test' };
  const store = {
    databaseUrl: `postgres://${user.user}:${user.password}@127.0.0.1:${pg.port}/kumoss`,
    postgresUrl: pg.url(),
  };
  try {
    if (shape === 'dev') {
      const spec = {
        ...loadDevServerSpec(),
        port: await freePort(),
        http_port: await freePort(),
        db_filename: undefined,
        headless: true,
      };
      const [temporal] = await Promise.all([
        startDevServer(spec, { dataDir: root }),
        pg.createDatabase('kumoss', user),
      ]);
      return {
        temporalAddress: temporal.address,
        ...store,
        stop: async () => {
          await Promise.allSettled([temporal.stop(), pg.stop()]);
        },
      };
    }
    const [cluster] = await Promise.all([
      startTemporalCluster({ pg, dir: join(root, 'temporal') }),
      pg.createDatabase('kumoss', user),
    ]);
    return {
      temporalAddress: cluster.address,
      ...store,
      cluster: {
        pids: Object.fromEntries(Object.entries(cluster.processes).map(([k, p]) => [k, p.pid ?? 0])),
      },
      stop: async () => {
        await cluster.stop();
        await pg.stop();
      },
    };
  } catch (err) {
    await pg.stop();
    throw err;
  }
}

const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} };

export async function startTestStack(
  shape: StackShape = 'dev',
): Promise<{ stack: TestStack; stop: () => Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'kumoss-test-'));
  const parts = await Promise.allSettled([
    startTemporalAndStore(shape, root),
    startObjectStore({ directory: join(root, 's3'), bucket: 'kumoss-test' }),
    startGitHost({ reposDir: join(root, 'git'), certsDir: join(root, 'certs') }),
    bundleWorkflowCode({ workflowsPath, logger: silent }),
    startAwsEmulator({}),
  ] as const);
  const [c, st, g, b, a] = parts;
  if (
    c.status === 'rejected' ||
    st.status === 'rejected' ||
    g.status === 'rejected' ||
    b.status === 'rejected' ||
    a.status === 'rejected'
  ) {
    // What did start is stopped, so a failed start leaves no process behind to hold the run open.
    await Promise.allSettled([
      c.status === 'fulfilled' ? c.value.stop() : undefined,
      st.status === 'fulfilled' ? st.value.close() : undefined,
      g.status === 'fulfilled' ? g.value.close() : undefined,
      a.status === 'fulfilled' ? a.value.stop() : undefined,
    ]);
    rmSync(root, { recursive: true, force: true });
    throw (parts.find((p) => p.status === 'rejected') as PromiseRejectedResult).reason;
  }
  const [core, store, gitHost, bundle, aws] = [c.value, st.value, g.value, b.value, a.value];
  const db = { url: core.databaseUrl };
  const workflowBundlePath = join(root, 'workflow-bundle.js');
  writeFileSync(workflowBundlePath, bundle.code);
  // The session and round workflows write to the metadata store: its schema is in place first.
  const schema = createDb(db.url);
  await migrate(schema);
  await schema.destroy();
  return {
    stack: {
      root,
      temporalAddress: core.temporalAddress,
      namespace: 'default',
      s3Endpoint: store.endpoint,
      bucket: 'kumoss-test',
      gitHostUrl: gitHost.url,
      gitReposDir: gitHost.reposDir,
      gitCaFile: gitHost.caPath,
      databaseUrl: db.url,
      postgresUrl: core.postgresUrl,
      workflowBundlePath,
      awsEndpoint: aws.endpoint,
      ...('cluster' in core ? { cluster: core.cluster } : {}),
    },
    stop: async () => {
      await Promise.allSettled([core.stop(), store.close(), gitHost.close(), aws.stop()]);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface StackWorker {
  client: Client;
  git: GitClient;
  artifacts: ArtifactStore;
  engine: EngineDeps;
  /** Stops the worker and closes the connections. */
  stop(): Promise<void>;
}

export type EngineKind = 'terraform' | 'tofu';

/** The engine's AWS settings on a stack: its moto_server, emulator credentials. */
export function awsEngineEnv(awsEndpoint: string): NodeJS.ProcessEnv {
  return {
    AWS_ENDPOINT_URL: awsEndpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'kumoss-emulator',
    AWS_SECRET_ACCESS_KEY: TEST_ENGINE_AWS_SECRET,
  };
}

/**
 * The engine's cloud secret in the tests (moto takes any): it carries SECRET_MARKER, so the run's
 * closing scan fails if the engine's environment reaches a history or an artifact.
 */
export const TEST_ENGINE_AWS_SECRET = `kumoss-emulator-${SECRET_MARKER}-engine`;

/** The emulator's keys in the tests, as a run of an organization without an AWS connection gets them. */
export const TEST_AWS_EMULATOR = {
  AWS_ACCESS_KEY_ID: 'kumoss-emulator',
  AWS_SECRET_ACCESS_KEY: TEST_ENGINE_AWS_SECRET,
};

/**
 * The object store's secret key the tests' workers hold for Kumoss-managed state (s3rver checks the
 * key id only): it carries SECRET_MARKER, so the closing scan fails if a plan or state carries it.
 */
export const TEST_STORE_SECRET = `${SECRET_MARKER}-store-key`;

/** The engine sandbox of the tests' workers: the worker's own, plus the test cloud and `writable`. */
export function testSandbox(writable: string[] = []): EngineSandbox {
  return new EngineSandbox({
    mode: 'bubblewrap',
    readOnly: [toolPath('terraform'), toolPath('tofu'), cliConfigPath(), providerMirrorDir()],
    readWrite: [testCloudDir(), ...writable],
    // As a worker runs it (engine.network: isolated): the run's own endpoints and the test cloud's.
    network: { relay: toolPath('egress-relay'), allow: testEgressAllowed },
  });
}

const sharedSandbox = { current: undefined as EngineSandbox | undefined };

export function stackEngineDeps(kind: EngineKind = 'terraform', awsEndpoint?: string): EngineDeps {
  sharedSandbox.current ??= testSandbox();
  return {
    sandbox: sharedSandbox.current,
    kind,
    binary: toolPath(kind),
    cliConfigFile: cliConfigPath(),
    timeoutMs: 10 * 60 * 1000,
    // What the worker runs the engine with by default.
    goMemoryLimitMib: DEFAULT_GO_MEMORY_LIMIT_MIB,
    // The endpoint as a setting; the keys as a run's credentials (an engine never takes a
    // credential from its settings).
    ...(awsEndpoint
      ? {
          env: awsEngineEnv(awsEndpoint),
          runCredentials: () =>
            Promise.resolve({ env: TEST_AWS_EMULATOR, expiresAt: Number.POSITIVE_INFINITY }),
        }
      : {}),
  };
}

export interface TestActivityOptions {
  engine?: EngineKind;
  model?: ModelProvider;
  /** Prompt catalogue directory (default: the repository's prompts/). */
  promptsDir?: string;
  /** The runner DAGs' registry and cloud clients (test/support/runner-bed.ts). */
  runners?: RunnerDeps;
  /** Git client (default: the stack's git host CA, no token); its own tokens are not sent. */
  git?: GitClient;
  /** The operator's git tokens by origin (a worker's GIT_TOKEN / GITEA_TOKEN hosts). */
  gitTokens?: Record<string, string>;
  /** Where round checkouts go (default: a fresh temporary directory). */
  workDir?: string;
  /** The engine binary to run instead of the real one's path (a fault-injecting wrapper around it). */
  engineBinary?: string;
  /** The engine sandbox (default: testSandbox()). */
  sandbox?: EngineSandbox;
  /** Artifact store (default: the stack's object store). */
  artifacts?: ArtifactStore;
  /** Called after every engine process (benchmarks). */
  onEngineCall?: EngineDeps['onCall'];
  /** Engine processes at once (engine.max_concurrent; 0 = cores); default: no limit. */
  engineSlots?: number;
  /** The metadata store the session and round workflows write to (default: the stack's). */
  db?: Db;
  /** GitHub pull requests (a loopback GitHub API) and the hosts it serves. */
  github?: { client: GitHubPullRequests; hosts: string[] };
  /** A Gitea server and its pull-request client. */
  gitea?: { url: string; client: GiteaPullRequests };
}

/** Kumoss-managed state on a stack's object store and metadata store, as a worker builds it. */
export function stackManagedState(
  stack: TestStack,
  db: Db,
  o: Partial<ManagedStateConfig> = {},
): ManagedState {
  return new ManagedState(
    {
      endpoint: stack.s3Endpoint,
      bucket: stack.bucket,
      region: 'us-east-1',
      accessKeyId: storageCredentials({
        endpoint: stack.s3Endpoint,
        bucket: stack.bucket,
        region: 'us-east-1',
      }).accessKeyId,
      secretAccessKey: TEST_STORE_SECRET,
      prefix: 'state',
      ...o,
    },
    db,
  );
}

/** The real activities on a stack's components, and the clients they use. */
export function stackActivities(stack: TestStack, o: TestActivityOptions = {}) {
  const kind = o.engine ?? 'terraform';
  const db = o.db ?? createDb(stack.databaseUrl);
  // Credentials per run, as a worker chooses them (activities/git-access.ts).
  const box = secretBoxFromEnv();
  const testGit = o.git ?? new GitClient({ caFile: stack.gitCaFile });
  const gitAccess = new GitAccess({
    git: testGit,
    operatorTokens: o.gitTokens ?? {},
    // The tests' installation serves all its organizations with its forge tokens (the boundary
    // itself: test/api/git-connections.test.ts).
    operatorOrganizations: ['*'],
    db,
    ...(box ? { box } : {}),
  });
  const git = gitAccess.local;
  const artifacts =
    o.artifacts ??
    new ArtifactStore(
      createS3Client({ endpoint: stack.s3Endpoint, bucket: stack.bucket, region: 'us-east-1' }),
      stack.bucket,
      artifactIndex(db),
    );
  const slots = o.engineSlots !== undefined ? new EngineSlots(o.engineSlots) : undefined;
  const managedState = stackManagedState(stack, db);
  const credentials = new CloudCredentials({
    db,
    durationSeconds: 900,
    awsEmulator: TEST_AWS_EMULATOR,
    ...(box ? { box } : {}),
    sts: () =>
      new STSClient({
        region: 'us-east-1',
        endpoint: stack.awsEndpoint,
        credentials: { accessKeyId: 'kumoss-emulator', secretAccessKey: 'kumoss-emulator' },
      }),
  });
  const deps = (k: EngineKind): EngineDeps => ({
    ...stackEngineDeps(k, stack.awsEndpoint),
    managedState,
    cloudCredentials: credentials,
    ...(slots ? { slots } : {}),
    ...(o.engineBinary ? { binary: o.engineBinary } : {}),
    ...(o.sandbox ? { sandbox: o.sandbox } : {}),
    ...(o.onEngineCall ? { onCall: o.onEngineCall } : {}),
  });
  const engines = { terraform: deps('terraform'), tofu: deps('tofu') };
  const activities = createActivities({
    engine: engines[kind],
    engines,
    // The tests' webhook receivers listen on loopback, as a deployment's allowed targets would be named.
    targets: { allowed: ['127.0.0.1'] },
    git,
    artifacts,
    model: o.model ?? new OfflineModel(),
    catalogue: new PromptCatalogue(o.promptsDir ?? join(projectRoot, 'prompts')),
    workspaces: new RoundWorkspaces(
      o.workDir ?? mkdtempSync(join(tmpdir(), 'kumoss-ws-')),
      git,
      engines,
      kind,
      gitAccess,
    ),
    stackWorkspaces: new StackWorkspaces(mkdtempSync(join(tmpdir(), 'kumoss-stack-work-'))),
    gitAccess,
    ...(o.runners ? { runners: o.runners } : {}),
    db,
    ...(o.github ? { github: o.github.client, githubHosts: o.github.hosts } : {}),
    ...(o.gitea ? { gitea: o.gitea } : {}),
  });
  return { activities, git: testGit, artifacts, engine: engines[kind] };
}

/**
 * A worker with the real activities on `taskQueue` of a stack, and a client — for the scripts and
 * benchmarks that run outside vitest (record-histories, bench/).
 */
export async function startStackWorker(
  stack: TestStack,
  taskQueue: string,
  opts: TestActivityOptions & {
    /** How the worker and the client reach Temporal (default: the stack's server, in the clear). */
    temporal?: TemporalTarget;
  } = {},
): Promise<StackWorker> {
  const { activities, git, artifacts, engine } = stackActivities(stack, opts);
  const target = opts.temporal?.connection ?? { address: stack.temporalAddress };
  const native = await NativeConnection.connect(target);
  const worker = await createWorker({
    connection: native,
    namespace: stack.namespace,
    taskQueue,
    activities,
    workflowBundlePath: stack.workflowBundlePath,
    // As the worker process does for its engine slots.
    detections: detectionsFor(opts.engineSlots ?? 0),
  });
  const running = worker.run();
  const connection = await Connection.connect(target);
  return {
    client: new Client({ connection, namespace: stack.namespace }),
    git,
    artifacts,
    engine,
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
      await native.close();
    },
  };
}

/** {@link startTestStack} in a child process (test/support/stack-process.ts). */
export async function startTestStackProcess(): Promise<{ stack: TestStack; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(projectRoot, 'test/support/stack-process.ts')],
    {
      cwd: projectRoot,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stack = await new Promise<TestStack>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)) as TestStack);
    });
    child.once('exit', (code) => reject(new Error(`the stack process exited (${code}) before it was up`)));
  });
  return {
    stack,
    stop: async () => {
      child.stdin.end();
      await exited;
    },
  };
}
