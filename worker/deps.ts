// The real clients the activities get, built from configuration.
import { join } from 'node:path';
import { createActivities, type Activities } from '../activities';
import { artifactIndex } from '../shared/infra/db/artifacts';
import { ArtifactStore, createS3Client, storageCredentials } from '../shared/infra/object-store';
import { ManagedState } from '../activities/managed-state';
import type { EngineDeps } from '../activities/drift-detection';
import { EngineSlots } from '../activities/engine-slots';
import { GitClient } from '../activities/git';
import { GitAccess } from '../activities/git-access';
import { readFileSync } from 'node:fs';
import { GiteaPullRequests } from '../activities/gitea';
import { GitLabMergeRequests } from '../activities/gitlab';
import { GitHubPullRequests } from '../activities/github';
import { createModel } from '../activities/model';
import { connectionClients } from '../activities/runners/connection-clients';
import type { Db } from '../shared/infra/db';
import { PromptCatalogue } from '../activities/prompt-catalogue';
import { RoundWorkspaces, StackWorkspaces } from '../activities/workspace';
import {
  dataDir,
  gitTrustBundle,
  isLoopback,
  targetPolicy,
  policiesDir,
  promptsDir,
  type KumossConfig,
} from '../shared/infra/config';
import { cliConfigPath, providerMirrorDir, toolPath } from '../shared/infra/tools.mjs';
import { EngineSandbox } from '../activities/sandbox';
import { CloudCredentials, WORKER_CLOUD_CREDENTIALS } from '../activities/cloud-credentials';
import { STSClient } from '@aws-sdk/client-sts';
import { secretBoxFromEnv } from '../shared/infra/secret-box';

/** Environment variables that carry cloud settings to the engine's providers. */
const CLOUD_ENV = /^(AWS_|GOOGLE_|CLOUDSDK_|ARM_|AZURE_|OCI_)/;

/** The keys of an AWS emulator on loopback (moto takes any): nobody's cloud identity. */
export const EMULATOR_KEYS = {
  AWS_ACCESS_KEY_ID: 'kumoss-emulator',
  AWS_SECRET_ACCESS_KEY: 'kumoss-emulator',
};

/**
 * The cloud settings of the engine's environment: the worker's cloud variables that are settings
 * (a region, an endpoint) — never a credential of the worker's, which no run gets
 * (activities/cloud-credentials.ts) — and the AWS endpoint of the configuration.
 */
export function engineCloudEnv(
  config: KumossConfig,
  env: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env))
    if (CLOUD_ENV.test(k) && !WORKER_CLOUD_CREDENTIALS.test(k) && v !== undefined) out[k] = v;
  const endpoint = config.engine.aws_endpoint_url;
  if (endpoint) {
    out.AWS_ENDPOINT_URL = endpoint;
    out.AWS_REGION ??= config.storage.region;
  }
  return out;
}

/** Kumoss-managed state on the configured object store (undefined when `state.managed` is off). */
export function managedState(config: KumossConfig, db: Db): ManagedState | undefined {
  if (!config.state.managed) return undefined;
  return new ManagedState(
    {
      endpoint: config.storage.endpoint,
      bucket: config.state.bucket || config.storage.bucket,
      region: config.storage.region,
      ...storageCredentials(config.storage),
      prefix: config.state.prefix,
      lockTtlMs: config.state.lock_ttl_seconds * 1000,
      lockWaitMs: config.state.lock_wait_seconds * 1000,
    },
    db,
  );
}

/**
 * The engine's sandbox: the engine binaries, the CLI config and the provider mirror read-only, the
 * configured writable directories; each call adds its own run directory.
 */
export function engineSandbox(config: KumossConfig): EngineSandbox {
  const allow = config.engine.egress_allow;
  return new EngineSandbox({
    mode: config.engine.sandbox,
    readOnly: [toolPath('terraform'), toolPath('tofu'), cliConfigPath(), providerMirrorDir()],
    readWrite: config.engine.sandbox_writable,
    ...(config.engine.network === 'isolated'
      ? { network: { relay: toolPath('egress-relay'), allow: () => allow } }
      : {}),
  });
}

/**
 * Runs' own cloud credentials: the worker assumes its organization's role with its own identity,
 * through STS at the engine's AWS endpoint (the embedded moto under `npm start`).
 */
export function cloudCredentials(config: KumossConfig, db: Db): CloudCredentials {
  const endpoint = config.engine.aws_endpoint_url;
  const box = secretBoxFromEnv();
  return new CloudCredentials({
    db,
    durationSeconds: config.engine.timeout_seconds,
    // The embedded AWS emulator (`npm start`'s moto): its keys for the AWS runs of organizations
    // without an AWS connection. A real AWS endpoint gives such runs none.
    ...(endpoint && isLoopback(endpoint) ? { awsEmulator: EMULATOR_KEYS } : {}),
    ...(box ? { box } : {}),
    ...(config.runners.gcp.endpoint_url
      ? { googleEndpoints: [new URL(config.runners.gcp.endpoint_url).origin] }
      : {}),
    sts: () =>
      new STSClient({
        region: config.storage.region,
        ...(endpoint ? { endpoint } : {}),
        ...(endpoint && isLoopback(endpoint) && !process.env.AWS_ACCESS_KEY_ID
          ? { credentials: { accessKeyId: 'kumoss-emulator', secretAccessKey: 'kumoss-emulator' } }
          : {}),
      }),
  });
}

export function engineDeps(
  config: KumossConfig,
  kind: 'terraform' | 'tofu',
  slots?: EngineSlots,
  managed?: ManagedState,
  sandbox: EngineSandbox = engineSandbox(config),
  credentials?: CloudCredentials,
): EngineDeps {
  return {
    sandbox,
    ...(credentials ? { cloudCredentials: credentials } : {}),
    ...(slots ? { slots } : {}),
    ...(managed ? { managedState: managed } : {}),
    kind,
    binary: toolPath(kind),
    cliConfigFile: cliConfigPath(),
    timeoutMs: config.engine.timeout_seconds * 1000,
    goMemoryLimitMib: config.engine.go_memory_limit_mib,
    env: engineCloudEnv(config),
  };
}

export function githubClient(config: KumossConfig, token: string): GitHubPullRequests {
  return new GitHubPullRequests({
    token,
    ...(config.services.github.api_url ? { baseUrl: config.services.github.api_url } : {}),
  });
}

/**
 * The runner DAGs' clients, per step from the group's cloud connection (its role assumed, or what an
 * admin stored): activities/runners/connection-clients.ts. The emulator on loopback (`npm start`'s
 * moto) takes its fixed keys for a connection that holds none.
 */
export function runnerDeps(config: KumossConfig, db: Db, credentials = cloudCredentials(config, db)) {
  const awsEndpoint = config.runners.aws.endpoint_url;
  return {
    db,
    clients: connectionClients({
      db,
      credentials,
      awsEndpoint,
      gcpEndpoint: config.runners.gcp.endpoint_url,
      ...(awsEndpoint && isLoopback(awsEndpoint) ? { awsEmulator: EMULATOR_KEYS } : {}),
    }),
  };
}

/**
 * Which origin gets which token: GIT_TOKEN goes only to the hosts named in `services.github.hosts`
 * and `services.gitlab.hosts`, GITEA_TOKEN only to `services.gitea.url`. A repository on any other
 * origin is fetched without credentials (and fails there if it needs them).
 */
export function gitHostTokens(
  config: KumossConfig,
  env: Partial<Record<string, string>>,
): Record<string, string> {
  const tokens: Record<string, string> = {};
  const gitToken = env.GIT_TOKEN;
  if (gitToken) {
    for (const host of [...config.services.github.hosts, ...config.services.gitlab.hosts]) {
      tokens[new URL(`https://${host}`).origin] = gitToken;
    }
  }
  const giteaUrl = config.services.gitea.url;
  if (giteaUrl && env.GITEA_TOKEN) tokens[new URL(giteaUrl).origin] = env.GITEA_TOKEN;
  return tokens;
}

export function buildActivities(
  config: KumossConfig,
  db: Db,
): { activities: Activities; artifacts: ArtifactStore; sandbox: EngineSandbox } {
  const artifacts = new ArtifactStore(
    createS3Client(config.storage),
    config.storage.bucket,
    artifactIndex(db),
  );
  const giteaToken = process.env.GITEA_TOKEN;
  const secretBox = secretBoxFromEnv();
  const giteaUrl = config.services.gitea.url;
  // Git's credentials are chosen per run (activities/git-access.ts): the shared client carries none.
  const gitAccess = new GitAccess({
    git: new GitClient({ caFile: gitTrustBundle(config) }),
    operatorTokens: gitHostTokens(config, process.env),
    operatorOrganizations: config.security.operator_git_credentials_for,
    targets: targetPolicy(config),
    db,
    ...(secretBox ? { box: secretBox } : {}),
  });
  const git = gitAccess.local;
  // One set of engine slots for the process: terraform and tofu calls share them.
  const slots = new EngineSlots(config.engine.max_concurrent);
  const managed = managedState(config, db);
  const sandbox = engineSandbox(config);
  const credentials = cloudCredentials(config, db);
  const engines = {
    terraform: engineDeps(config, 'terraform', slots, managed, sandbox, credentials),
    tofu: engineDeps(config, 'tofu', slots, managed, sandbox, credentials),
  };
  const activities = createActivities({
    engine: engines[config.engine.binary],
    engines,
    sessionDefaults: {
      max_drift_reports: config.orchestration.max_drift_reports,
      drift_group_operations: config.orchestration.drift_group_operations,
      activity_heartbeat_seconds: config.orchestration.activity_heartbeat_seconds,
      max_repair_cycles: config.orchestration.max_repair_cycles,
    },
    git,
    artifacts,
    model: createModel(config.model),
    modelConcurrency: config.model.max_concurrent,
    catalogue: new PromptCatalogue(promptsDir(config)),
    policiesDir: policiesDir(config),
    workspaces: new RoundWorkspaces(
      join(dataDir(config), 'work'),
      git,
      engines,
      config.engine.binary,
      gitAccess,
    ),
    stackWorkspaces: new StackWorkspaces(join(dataDir(config), 'stack-work')),
    gitAccess,
    ...(process.env.GIT_TOKEN ? { github: githubClient(config, process.env.GIT_TOKEN) } : {}),
    githubHosts: config.services.github.hosts,
    gitlab: {
      hosts: config.services.gitlab.hosts,
      ...(process.env.GIT_TOKEN
        ? {
            client: new GitLabMergeRequests({
              url:
                config.services.gitlab.api_url ||
                `https://${config.services.gitlab.hosts[0] ?? 'gitlab.com'}`,
              token: process.env.GIT_TOKEN,
            }),
          }
        : {}),
    },
    ...(giteaUrl
      ? {
          gitea: {
            url: giteaUrl,
            ...(giteaToken
              ? {
                  client: new GiteaPullRequests({
                    url: giteaUrl,
                    token: giteaToken,
                    ca: readFileSync(gitTrustBundle(config)),
                  }),
                }
              : {}),
          },
        }
      : {}),
    db,
    targets: targetPolicy(config),
    runners: runnerDeps(config, db, credentials),
  });
  return { activities, artifacts, sandbox };
}
