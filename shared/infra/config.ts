// Configuration: one YAML file plus environment overrides, validated with zod at start-up.
// Node-only (reads files); workflows receive the values they need in their input instead.
import type { TargetPolicy } from './network-targets';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { DEFAULT_HEARTBEAT_SECONDS } from '../contracts';

export const projectRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));

const port = z.number().int().min(0).max(65535);

/** `engine.go_memory_limit_mib`'s default. */
export const DEFAULT_GO_MEMORY_LIMIT_MIB = 1024;

export const configSchema = z.object({
  data_dir: z.string().min(1).default('.kumoss'),
  temporal: z.object({
    address: z.string().min(1).default('127.0.0.1:7233'),
    namespace: z.string().min(1).default('default'),
    task_queue: z.string().min(1).default('kumoss'),
    ui_url: z.string().url().default('http://127.0.0.1:8233'),
  }),
  engine: z.object({
    binary: z.enum(['terraform', 'tofu']).default('terraform'),
    timeout_seconds: z.number().int().positive().default(1800),
    /**
     * AWS endpoint the engine's AWS provider talks to ('' = the real AWS endpoints). `npm start`
     * points it at its embedded moto_server. Credentials always come from the worker's environment.
     */
    aws_endpoint_url: z.union([z.literal(''), z.string().url()]).default(''),
    /**
     * Engine processes one worker runs at once (every round, probe and stack detection shares
     * them; a call waits for a free one). 0 = as many as the machine has cores.
     */
    max_concurrent: z.number().int().min(0).max(256).default(0),
    /**
     * Stack detections one worker runs at once (its detection queue's activity slots; their
     * engine calls share the slots above). 0 = twice `max_concurrent`: while some plan, the others
     * fetch, read plans and upload.
     */
    max_concurrent_detections: z.number().int().min(0).max(1024).default(0),
    /**
     * Every terraform/tofu process runs under bubblewrap (activities/sandbox.ts): its run's
     * directory, the engine binaries and provider mirror read-only, a private /tmp and /proc, a
     * clean environment. Where bubblewrap cannot run, engine calls are refused. `off` runs
     * repositories' code with the worker's own reach (README: threat model).
     */
    sandbox: z.enum(['bubblewrap', 'off']).default('bubblewrap'),
    /**
     * Directories a sandboxed engine may also read and write (a local backend's state directory
     * kept on the worker): every repository's code reaches them.
     */
    sandbox_writable: z.array(z.string().startsWith('/', 'must be an absolute path')).default([]),
    /**
     * `isolated`: a sandboxed engine process runs in a network namespace of its own whose only way
     * out is the worker's egress gate (activities/egress.ts): the run's state server, its cloud's
     * configured endpoint, its cloud's API domains when it holds that cloud's credentials, and
     * `egress_allow`. `shared`: the engine reaches whatever the worker reaches.
     */
    network: z.enum(['isolated', 'shared']).default('isolated'),
    /**
     * What every run's engine may reach besides its own: `host:port` or a URL (that destination
     * exactly, loopback and private included), `.example.com` (hosts below it on public addresses).
     */
    egress_allow: z
      .array(
        z
          .string()
          .regex(
            /^(\*?\.[a-z0-9.-]+|[a-z0-9.-]+:\d+|\[[0-9a-f:]+\]:\d+|https?:\/\/\S+)$/i,
            'must be host:port, a URL or .domain',
          ),
      )
      .default([]),
    /**
     * The engine's and its providers' Go runtimes collect garbage only when a process's heap nears
     * this many MiB (`GOGC=off`, `GOMEMLIMIT`): a plan of an ordinary root never stops to collect
     * (about 8 % less CPU a plan). A process whose live heap is near the limit (a root of tens of
     * thousands of resources, a provider that holds more) collects often: raise it. 0 = Go's
     * default collector.
     */
    go_memory_limit_mib: z.number().int().min(0).max(1_048_576).default(DEFAULT_GO_MEMORY_LIMIT_MIB),
  }),
  api: z.object({
    host: z.string().min(1).default('127.0.0.1'),
    port: port.default(8787),
  }),
  storage: z.object({
    endpoint: z.string().url().default('http://127.0.0.1:4568'),
    bucket: z.string().min(3).default('kumoss'),
    region: z.string().min(1).default('us-east-1'),
    presign_ttl_seconds: z.number().int().positive().max(604800).default(900),
  }),
  state: z
    .object({
      /**
       * A root that declares no backend gets an S3 backend on the object store under its state
       * project id, and a lease per state in the metadata store (activities/managed-state.ts).
       * false: such a root keeps the engine's local state in the worker's checkout (lost with it).
       */
      managed: z.boolean().default(true),
      /** Bucket of the managed states; empty: storage.bucket. */
      bucket: z.string().default(''),
      /** Key prefix: `<prefix>/<state project id>/terraform.tfstate`. */
      prefix: z.string().default('state'),
      /** A lease its holder stopped renewing (a killed worker) is free after this long. */
      lock_ttl_seconds: z.number().int().min(5).max(3600).default(15),
      /** How long an engine call waits for another call's lease before it fails and is retried. */
      lock_wait_seconds: z.number().int().min(1).max(86_400).default(600),
    })
    .default({ managed: true, bucket: '', prefix: 'state', lock_ttl_seconds: 15, lock_wait_seconds: 600 }),
  database: z.object({
    url: z.string().default(''),
    embedded_port: port.default(5433),
  }),
  git_host: z.object({
    host: z.string().min(1).default('127.0.0.1'),
    port: port.default(8443),
    repos_dir: z.string().min(1).default('git'),
    /** CA certificate of the git host; empty: the embedded host's own CA. */
    ca_file: z.string().default(''),
  }),
  orchestration: z.object({
    max_drift_reports: z.number().int().min(1).max(20).default(3),
    drift_group_operations: z.number().int().min(1).max(100).default(8),
    /** Polls of an event subscription before it closes: 21600 x 500 ms = 3 hours. */
    max_session_events_iteration: z.number().int().min(1).default(21600),
    /** How often an event subscription looks at its session (the seed's web app polls every 4-5 s). */
    session_events_poll_ms: z.number().int().min(50).max(10_000).default(500),
    /** A worker that dies mid-activity is noticed after this long; the activity then runs elsewhere. */
    activity_heartbeat_seconds: z.number().int().min(5).max(3600).default(DEFAULT_HEARTBEAT_SECONDS),
    /** Times a generate round's model may repair a change that does not validate. */
    max_repair_cycles: z.number().int().min(0).max(10).default(2),
    /** Four eyes: apply needs a second devops or admin's recorded approval of the pinned plan. */
    apply_requires_approval: z.boolean().default(false),
  }),
  prompts: z.object({
    /** The prompt catalogue: targeting policies, drift-exception rules, resource prompts. */
    dir: z.string().min(1).default('prompts'),
  }),
  compliance: z
    .object({
      /** Rego policies per cloud (`<dir>/<cloud>/*.rego`), evaluated by OPA on every pinned plan. */
      policies_dir: z.string().min(1).default('policies'),
    })
    .default({ policies_dir: 'policies' }),
  model: z.object({
    provider: z.enum(['offline', 'anthropic']).default('offline'),
    name: z.string().min(1).default('claude-sonnet-4-5'),
    small_name: z.string().min(1).default('claude-haiku-4-5'),
    /** Empty: the SDK's default (or ANTHROPIC_BASE_URL). */
    base_url: z.string().default(''),
    /** Requests one drift iteration has in flight at once, asking for its groups' changes. */
    max_concurrent: z.number().int().min(1).max(64).default(4),
  }),
  services: z.object({
    authz: z.object({
      enabled: z.boolean().default(false),
      url: z.string().default(''),
    }),
    mapping: z
      .object({ enabled: z.boolean().default(false), url: z.string().default('') })
      .default({ enabled: false, url: '' }),
    github: z
      .object({
        /** Repository hosts whose pull requests go through the GitHub REST API. */
        hosts: z.array(z.string()).default(['github.com']),
        /** Empty: https://api.github.com */
        api_url: z.string().default(''),
      })
      .default({ hosts: ['github.com'], api_url: '' }),
    gitlab: z
      .object({
        /** Repository hosts whose merge requests go through the GitLab REST API (with GIT_TOKEN). */
        hosts: z.array(z.string()).default(['gitlab.com']),
        /** Empty: https://<the repository's host> */
        api_url: z.string().default(''),
      })
      .default({ hosts: ['gitlab.com'], api_url: '' }),
    gitea: z
      .object({
        /** A Gitea server (https://host[:port]) whose repositories' pull requests go through its API
         * with GITEA_TOKEN. Empty: none, unless `npm start` runs the embedded one. */
        url: z.string().default(''),
        /** The port `npm start` runs the embedded Gitea on (0: do not run it). */
        embedded_port: z.number().int().min(0).max(65535).default(0),
      })
      .default({ url: '', embedded_port: 0 }),
    google_oidc: z
      .object({
        /** Where Google's token-signing certificates are fetched (PEM by key id). Empty: Google's own. */
        certs_url: z.string().default(''),
      })
      .default({ certs_url: '' }),
  }),
  /** The clouds behind CI runner groups (the runner environment drift DAG). */
  runners: z
    .object({
      aws: z
        .object({
          /** Empty: the real AWS endpoints (credentials from the standard AWS environment). */
          endpoint_url: z.string().default(''),
          /** `npm start` runs moto_server on this port and points the worker at it (0: off). */
          embedded_emulator_port: port.default(0),
        })
        .default({ endpoint_url: '', embedded_emulator_port: 0 }),
      gcp: z
        .object({
          /** Empty: the real Google APIs (iam, compute, run .googleapis.com); Application Default Credentials, or a fixed GOOGLE_OAUTH_ACCESS_TOKEN. */
          endpoint_url: z.string().default(''),
        })
        .default({ endpoint_url: '' }),
    })
    .default({
      aws: { endpoint_url: '', embedded_emulator_port: 0 },
      gcp: { endpoint_url: '' },
    }),
  /** What Kumoss may connect to on a user's word (shared/infra/network-targets.ts). */
  security: z
    .object({
      /**
       * Private, loopback or link-local targets (repository URLs, webhook endpoints) that are
       * allowed: origins (`https://10.0.0.5:8443`) or hosts. The git host and Gitea of this
       * configuration are always allowed.
       */
      private_targets_allowed: z.array(z.string().min(1)).default([]),
      /**
       * The organizations (by name; `*`: every one) whose runs may use the operator's git tokens
       * (GIT_TOKEN, GITEA_TOKEN) — for git on a host they connected without a credential of their
       * own, and for pull requests on the forges. Another organization uses its own credential.
       */
      operator_git_credentials_for: z.array(z.string().min(1)).default(['default']),
      /** Per API process (api/rate-limits.ts): over a limit, 429 with Retry-After. */
      rate_limits: z
        .object({
          sign_in_per_minute: z.number().int().min(1).default(30),
          failed_auth_per_minute: z.number().int().min(1).default(300),
          ingestion_per_minute: z.number().int().min(1).default(600),
        })
        .default({ sign_in_per_minute: 30, failed_auth_per_minute: 300, ingestion_per_minute: 600 }),
    })
    .default({
      private_targets_allowed: [],
      operator_git_credentials_for: ['default'],
      rate_limits: { sign_in_per_minute: 30, failed_auth_per_minute: 300, ingestion_per_minute: 600 },
    }),
  /** Traces, metrics and request logs (README "Running in production"). */
  observability: z
    .object({
      /** OTLP/HTTP collector (http://host:4318) for traces; empty: tracing off. */
      otlp_endpoint: z.union([z.literal(''), z.string().url()]).default(''),
      /** host:port the worker serves the Temporal SDK's Prometheus metrics on; empty: off. */
      worker_metrics_address: z
        .union([z.literal(''), z.string().regex(/^[\w.-]+:\d{1,5}$/, 'host:port')])
        .default(''),
      /** GET /metrics on the API (Prometheus). */
      api_metrics: z.boolean().default(true),
      /** One log line per API request, with its request id. */
      request_log: z.boolean().default(true),
    })
    .default({ otlp_endpoint: '', worker_metrics_address: '', api_metrics: true, request_log: true }),
});

export type KumossConfig = z.infer<typeof configSchema>;

/** Environment variables that override a config key; numbers and booleans are parsed. */
export const ENV_OVERRIDES: Record<string, string> = {
  KUMOSS_DATA_DIR: 'data_dir',
  TEMPORAL_ADDRESS: 'temporal.address',
  TEMPORAL_NAMESPACE: 'temporal.namespace',
  KUMOSS_TASK_QUEUE: 'temporal.task_queue',
  KUMOSS_TEMPORAL_UI_URL: 'temporal.ui_url',
  KUMOSS_ENGINE: 'engine.binary',
  KUMOSS_ENGINE_AWS_ENDPOINT_URL: 'engine.aws_endpoint_url',
  KUMOSS_ENGINE_MAX_CONCURRENT: 'engine.max_concurrent',
  KUMOSS_ENGINE_MAX_CONCURRENT_DETECTIONS: 'engine.max_concurrent_detections',
  KUMOSS_ENGINE_SANDBOX: 'engine.sandbox',
  KUMOSS_ENGINE_NETWORK: 'engine.network',
  KUMOSS_ENGINE_GO_MEMORY_LIMIT_MIB: 'engine.go_memory_limit_mib',
  KUMOSS_API_HOST: 'api.host',
  KUMOSS_API_PORT: 'api.port',
  S3_ENDPOINT: 'storage.endpoint',
  S3_BUCKET: 'storage.bucket',
  AWS_REGION: 'storage.region',
  KUMOSS_MANAGED_STATE: 'state.managed',
  KUMOSS_STATE_BUCKET: 'state.bucket',
  DATABASE_URL: 'database.url',
  KUMOSS_DB_PORT: 'database.embedded_port',
  KUMOSS_GIT_HOST_PORT: 'git_host.port',
  KUMOSS_GIT_REPOS_DIR: 'git_host.repos_dir',
  KUMOSS_GIT_CA_FILE: 'git_host.ca_file',
  KUMOSS_MAX_DRIFT_REPORTS: 'orchestration.max_drift_reports',
  KUMOSS_DRIFT_GROUP_OPERATIONS: 'orchestration.drift_group_operations',
  KUMOSS_MAX_SESSION_EVENTS_ITERATION: 'orchestration.max_session_events_iteration',
  KUMOSS_SESSION_EVENTS_POLL_MS: 'orchestration.session_events_poll_ms',
  KUMOSS_ACTIVITY_HEARTBEAT_SECONDS: 'orchestration.activity_heartbeat_seconds',
  KUMOSS_MAX_REPAIR_CYCLES: 'orchestration.max_repair_cycles',
  KUMOSS_APPLY_REQUIRES_APPROVAL: 'orchestration.apply_requires_approval',
  KUMOSS_PROMPTS_DIR: 'prompts.dir',
  KUMOSS_POLICIES_DIR: 'compliance.policies_dir',
  KUMOSS_MODEL_PROVIDER: 'model.provider',
  KUMOSS_MODEL: 'model.name',
  KUMOSS_SMALL_MODEL: 'model.small_name',
  ANTHROPIC_BASE_URL: 'model.base_url',
  KUMOSS_MODEL_MAX_CONCURRENT: 'model.max_concurrent',
  KUMOSS_AUTHZ_ENABLED: 'services.authz.enabled',
  KUMOSS_AUTHZ_URL: 'services.authz.url',
  KUMOSS_GITHUB_API_URL: 'services.github.api_url',
  KUMOSS_GITLAB_API_URL: 'services.gitlab.api_url',
  KUMOSS_GITEA_URL: 'services.gitea.url',
  KUMOSS_GITEA_PORT: 'services.gitea.embedded_port',
  KUMOSS_MAPPING_ENABLED: 'services.mapping.enabled',
  KUMOSS_MAPPING_URL: 'services.mapping.url',
  KUMOSS_AWS_ENDPOINT_URL: 'runners.aws.endpoint_url',
  KUMOSS_AWS_EMULATOR_PORT: 'runners.aws.embedded_emulator_port',
  KUMOSS_GCP_ENDPOINT_URL: 'runners.gcp.endpoint_url',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'observability.otlp_endpoint',
  KUMOSS_WORKER_METRICS_ADDRESS: 'observability.worker_metrics_address',
  KUMOSS_API_METRICS: 'observability.api_metrics',
  KUMOSS_REQUEST_LOG: 'observability.request_log',
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function coerce(raw: string): unknown {
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (/^-?\d+$/.test(raw)) return Number(raw);
  return raw;
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[keys[keys.length - 1] as string] = value;
}

/**
 * Loads the YAML file (KUMOSS_CONFIG, default kumoss.yaml in the project root), applies the
 * environment overrides and validates the result. Throws ConfigError with every problem named.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): KumossConfig {
  const file = env.KUMOSS_CONFIG ?? join(projectRoot, 'kumoss.yaml');
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, 'utf8')) ?? {};
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`config file ${file} must hold a YAML mapping`);
  }
  const merged = structuredClone(raw) as Record<string, unknown>;
  for (const key of [
    'temporal',
    'engine',
    'api',
    'storage',
    'database',
    'git_host',
    'orchestration',
    'prompts',
    'model',
  ]) {
    merged[key] ??= {};
  }
  merged.services ??= {};
  (merged.services as Record<string, unknown>).authz ??= {};
  for (const [name, path] of Object.entries(ENV_OVERRIDES)) {
    const value = env[name];
    if (value !== undefined && value !== '') setPath(merged, path, coerce(value));
  }
  // A path list, as PATH is written.
  if (env.KUMOSS_PRIVATE_TARGETS_ALLOWED)
    setPath(
      merged,
      'security.private_targets_allowed',
      env.KUMOSS_PRIVATE_TARGETS_ALLOWED.split(/[\s,]+/).filter(Boolean),
    );
  if (env.KUMOSS_OPERATOR_GIT_CREDENTIALS_FOR)
    setPath(
      merged,
      'security.operator_git_credentials_for',
      env.KUMOSS_OPERATOR_GIT_CREDENTIALS_FOR.split(/[\s,]+/).filter(Boolean),
    );
  if (env.KUMOSS_ENGINE_EGRESS_ALLOW)
    setPath(merged, 'engine.egress_allow', env.KUMOSS_ENGINE_EGRESS_ALLOW.split(/[\s,]+/).filter(Boolean));
  if (env.KUMOSS_ENGINE_SANDBOX_WRITABLE)
    setPath(merged, 'engine.sandbox_writable', env.KUMOSS_ENGINE_SANDBOX_WRITABLE.split(':').filter(Boolean));
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`)
      .join('\n');
    throw new ConfigError(`invalid configuration (${file} plus environment overrides):\n${problems}`);
  }
  return parsed.data;
}

/** Absolute data directory (relative paths are taken from the project root). */
export function dataDir(config: KumossConfig): string {
  return isAbsolute(config.data_dir) ? config.data_dir : join(projectRoot, config.data_dir);
}

export function promptsDir(config: KumossConfig): string {
  return isAbsolute(config.prompts.dir) ? config.prompts.dir : join(projectRoot, config.prompts.dir);
}

export function policiesDir(config: KumossConfig): string {
  const dir = config.compliance.policies_dir;
  return isAbsolute(dir) ? dir : join(projectRoot, dir);
}

export function gitReposDir(config: KumossConfig): string {
  const dir = config.git_host.repos_dir;
  return isAbsolute(dir) ? dir : join(dataDir(config), dir);
}

/** The embedded git host's CA certificate (or git_host.ca_file for another private CA). */
export function gitCaFile(config: KumossConfig): string {
  const file = config.git_host.ca_file;
  if (!file) return join(dataDir(config), 'certs', 'ca.pem');
  return isAbsolute(file) ? file : join(projectRoot, file);
}

/**
 * The CA bundle git and the API trust: the system's roots plus the git host's CA, so the same
 * worker reaches the embedded host and GitHub alike. Written under data_dir/certs.
 */
export function gitTrustBundle(config: KumossConfig, env: NodeJS.ProcessEnv = process.env): string {
  const parts: string[] = [];
  const system = [env.SSL_CERT_FILE, '/etc/ssl/certs/ca-certificates.crt'].find((f) => f && existsSync(f));
  if (system) parts.push(readFileSync(system, 'utf8'));
  const own = gitCaFile(config);
  if (existsSync(own)) parts.push(readFileSync(own, 'utf8'));
  const bundle = join(dataDir(config), 'certs', 'trust-bundle.pem');
  mkdirSync(dirname(bundle), { recursive: true });
  writeFileSync(bundle, parts.join('\n'));
  return bundle;
}

/** The embedded PostgreSQL's passwords, kept in `<data_dir>/database.json` (scripts/embedded/database.ts). */
export const embeddedDatabaseSecrets = z.object({
  superuser: z.string().min(16),
  kumoss: z.string().min(16),
});

/** DATABASE_URL, or the embedded PostgreSQL the launcher runs on loopback (as the `kumoss` role). */
export function databaseUrl(config: KumossConfig): string {
  return config.database.url || embeddedDatabaseUrl(dataDir(config), config.database.embedded_port);
}

/** The `kumoss` role's URL of the embedded PostgreSQL whose passwords are kept in `data`. */
export function embeddedDatabaseUrl(data: string, port: number): string {
  const file = join(data, 'database.json');
  if (!existsSync(file))
    throw new Error(
      `DATABASE_URL is not set and there is no embedded metadata store yet (${file} is missing): run npm start, or set DATABASE_URL`,
    );
  const { kumoss } = embeddedDatabaseSecrets.parse(JSON.parse(readFileSync(file, 'utf8')));
  return `postgres://kumoss:${encodeURIComponent(kumoss)}@127.0.0.1:${port}/kumoss`;
}

export { isLoopback } from '../contracts';

/** The targets policy of this configuration: its own git host and Gitea, and what it names. */
export function targetPolicy(config: KumossConfig): TargetPolicy {
  return {
    allowed: [
      `https://${config.git_host.host}:${config.git_host.port}`,
      ...(config.services.gitea.url ? [new URL(config.services.gitea.url).origin] : []),
      ...config.security.private_targets_allowed,
    ],
  };
}
