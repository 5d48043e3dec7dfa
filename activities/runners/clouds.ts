// The cloud clients the runner DAG uses: AWS through the AWS SDK v3 (ECS, CloudWatch Logs,
// Secrets Manager), GCP through its REST APIs (IAM service accounts, Compute instance templates,
// Cloud Run v2 jobs). An endpoint override points either at an emulator (moto_server, a loopback
// server in tests). Errors are sorted once here: a 4xx answer is permanent, the rest is retried.
import { ApplicationFailure } from '@temporalio/activity';
import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { ECSClient } from '@aws-sdk/client-ecs';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GoogleAuth, OAuth2Client, type AuthClient, type gaxios } from 'google-auth-library';
import { ErrorTypes } from '../../shared/errors';

export interface AwsClients {
  ecs: ECSClient;
  logs: CloudWatchLogsClient;
  secrets: SecretsManagerClient;
  region: string;
}

export interface AwsCredentialIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface AwsOptions {
  /** Empty: the real AWS endpoints. */
  endpoint?: string;
  /** Absent: the SDK's default credential chain (environment, profile, instance role). */
  credentials?: AwsCredentialIdentity;
}

/** Clients per region, built once. */
export function awsClientFactory(opts: AwsOptions): (region: string) => AwsClients {
  const cache = new Map<string, AwsClients>();
  return (region) => {
    let clients = cache.get(region);
    if (!clients) {
      const config = {
        region,
        maxAttempts: 2,
        ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
        ...(opts.credentials ? { credentials: opts.credentials } : {}),
      };
      clients = {
        ecs: new ECSClient(config),
        logs: new CloudWatchLogsClient(config),
        secrets: new SecretsManagerClient(config),
        region,
      };
      cache.set(region, clients);
    }
    return clients;
  };
}

interface AwsServiceError {
  name?: string;
  message?: string;
  code?: string;
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
}

const THROTTLING = /Throttl|TooManyRequests|RequestLimitExceeded|SlowDown/;

/** An AWS error as a Temporal failure: 4xx (not throttling) permanent, everything else retried. */
export function awsFailure(err: unknown, what: string): Error {
  const e = err as AwsServiceError;
  const status = e.$metadata?.httpStatusCode;
  const message = `${what}: ${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
  if (e.$fault === 'client' && status && status < 500 && !THROTTLING.test(e.name ?? '')) {
    return ApplicationFailure.nonRetryable(message, ErrorTypes.CloudRequestRejected);
  }
  if (e.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(e.message ?? '')) {
    return new Error(`${what}: the AWS endpoint is unreachable (${e.message ?? 'connection refused'})`);
  }
  return new Error(message);
}

/** True for the "does not exist" answers of the AWS APIs the detectors read. */
export function isAwsNotFound(err: unknown): boolean {
  const e = err as AwsServiceError;
  return e.name === 'ResourceNotFoundException' || e.name === 'ClusterNotFoundException';
}

// ---- GCP ------------------------------------------------------------------------------------

export interface GcpOptions {
  /** Empty: the real Google API hosts. One override serves IAM, Compute and Cloud Run. */
  endpoint?: string;
  /**
   * A fixed OAuth 2 access token (GOOGLE_OAUTH_ACCESS_TOKEN): sent as it is, never refreshed.
   * Without it (and without `auth`), Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS
   * (a service-account key, workload identity federation, an authorized user), gcloud's ADC file,
   * or the metadata server — tokens fetched and refreshed by google-auth-library.
   */
  token?: string;
  /** The credentials to use instead (tests, or a caller with its own GoogleAuth). */
  auth?: GoogleAuth | AuthClient;
  /** How long to wait for a long-running operation before the step fails (default 5 min). */
  operationTimeoutMs?: number;
  /** Pause between polls of a Cloud Run operation (default 500 ms). */
  pollIntervalMs?: number;
}

export class GcpRequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface GcpServiceAccount {
  name: string;
  email: string;
  displayName?: string;
  description?: string;
  disabled?: boolean;
}

export interface GcpInstanceTemplate {
  name: string;
  description?: string;
  properties: {
    machineType: string;
    disks?: { boot?: boolean; initializeParams?: { sourceImage?: string } }[];
    serviceAccounts?: { email: string; scopes?: string[] }[];
    labels?: Record<string, string>;
  };
}

export interface GcpJob {
  name: string;
  labels?: Record<string, string>;
  template: { template: { containers: { image: string }[]; serviceAccount?: string } };
}

interface GcpOperation {
  name: string;
  done?: boolean;
  status?: string;
  error?: { message?: string; errors?: { message?: string }[] };
  selfLink?: string;
}

/** The scope every call asks for: the runner DAG reads and writes IAM, Compute and Cloud Run. */
export const GCP_SCOPES = ['https://www.googleapis.com/auth/cloud-platform'];

/** A path segment of a Google API URL: project ids, emails, names, regions — encoded. */
const seg = encodeURIComponent;

/** The three Google REST APIs the runner DAG reads and (in a repair) writes. */
export class GcpClient {
  private readonly hosts: { iam: string; compute: string; run: string };
  private readonly auth: GoogleAuth | AuthClient;

  constructor(private readonly opts: GcpOptions) {
    if (opts.auth) this.auth = opts.auth;
    else if (opts.token) {
      const fixed = new OAuth2Client();
      fixed.setCredentials({ access_token: opts.token });
      this.auth = fixed;
    } else
      this.auth = new GoogleAuth({
        scopes: GCP_SCOPES,
        // Every request names its project. Given one, the library skips its own project lookup,
        // which for federated credentials is a Cloud Resource Manager call needing a permission
        // there (it is used for nothing else: the quota project comes from GOOGLE_CLOUD_QUOTA_PROJECT).
        projectId: process.env.GOOGLE_CLOUD_PROJECT ?? process.env.GCLOUD_PROJECT ?? 'kumoss-runner-dag',
      });
    const e = opts.endpoint?.replace(/\/+$/, '');
    this.hosts = e
      ? { iam: e, compute: e, run: e }
      : {
          iam: 'https://iam.googleapis.com',
          compute: 'https://compute.googleapis.com',
          run: 'https://run.googleapis.com',
        };
  }

  /**
   * One authorized request (the library adds the bearer token, fetching or refreshing it first);
   * every HTTP status comes back here to be read as Google's error, never thrown by the transport.
   */
  private async call<T>(method: string, url: string, body?: unknown): Promise<T | null> {
    let res: gaxios.GaxiosResponse<string>;
    try {
      res = await this.auth.request<string>({
        url,
        method,
        ...(body === undefined
          ? {}
          : { data: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
        responseType: 'text',
        validateStatus: () => true,
        timeout: 30_000,
        retry: false,
      });
    } catch (err) {
      // Credentials that cannot be had (no ADC, a token exchange refused) or the network: said
      // without the request's configuration, which holds the headers.
      const cause = (err as { cause?: unknown }).cause;
      throw Object.assign(new Error(`${method} ${new URL(url).pathname}: ${(err as Error).message}`), {
        ...(cause ? { cause } : {}),
      });
    }
    if (method === 'GET' && res.status === 404) return null;
    const text = typeof res.data === 'string' ? res.data : JSON.stringify(res.data ?? '');
    if (res.status < 200 || res.status >= 300) {
      let message = text.slice(0, 500);
      try {
        const parsed = JSON.parse(text) as { error?: { message?: string } };
        if (parsed.error?.message) message = parsed.error.message;
      } catch {
        /* not JSON */
      }
      throw new GcpRequestError(res.status, `${method} ${new URL(url).pathname}: ${res.status} ${message}`);
    }
    return (text ? JSON.parse(text) : {}) as T;
  }

  // IAM service accounts
  serviceAccountEmail(project: string, accountId: string): string {
    return `${accountId}@${project}.iam.gserviceaccount.com`;
  }
  getServiceAccount(project: string, email: string) {
    return this.call<GcpServiceAccount>(
      'GET',
      `${this.hosts.iam}/v1/projects/${seg(project)}/serviceAccounts/${seg(email)}`,
    );
  }
  async createServiceAccount(
    project: string,
    accountId: string,
    sa: { displayName: string; description: string },
  ) {
    return this.call<GcpServiceAccount>(
      'POST',
      `${this.hosts.iam}/v1/projects/${seg(project)}/serviceAccounts`,
      {
        accountId,
        serviceAccount: sa,
      },
    );
  }
  patchServiceAccount(project: string, email: string, displayName: string) {
    return this.call<GcpServiceAccount>(
      'PATCH',
      `${this.hosts.iam}/v1/projects/${seg(project)}/serviceAccounts/${seg(email)}`,
      { serviceAccount: { displayName }, updateMask: 'displayName' },
    );
  }
  enableServiceAccount(project: string, email: string) {
    return this.call(
      'POST',
      `${this.hosts.iam}/v1/projects/${seg(project)}/serviceAccounts/${seg(email)}:enable`,
      {},
    );
  }
  deleteServiceAccount(project: string, email: string) {
    return this.call('DELETE', `${this.hosts.iam}/v1/projects/${seg(project)}/serviceAccounts/${seg(email)}`);
  }

  // Compute instance templates (global); inserts and deletes answer operations.
  getInstanceTemplate(project: string, name: string) {
    return this.call<GcpInstanceTemplate>(
      'GET',
      `${this.hosts.compute}/compute/v1/projects/${seg(project)}/global/instanceTemplates/${seg(name)}`,
    );
  }
  async insertInstanceTemplate(project: string, template: GcpInstanceTemplate) {
    const op = await this.call<GcpOperation>(
      'POST',
      `${this.hosts.compute}/compute/v1/projects/${seg(project)}/global/instanceTemplates`,
      template,
    );
    await this.waitCompute(project, op);
  }
  async deleteInstanceTemplate(project: string, name: string) {
    const op = await this.call<GcpOperation>(
      'DELETE',
      `${this.hosts.compute}/compute/v1/projects/${seg(project)}/global/instanceTemplates/${seg(name)}`,
    );
    await this.waitCompute(project, op);
  }
  private async waitCompute(project: string, op: GcpOperation | null): Promise<void> {
    let current = op;
    const deadline = Date.now() + (this.opts.operationTimeoutMs ?? 300_000);
    while (current && current.status !== 'DONE') {
      this.unfinished(current.name, deadline);
      current = await this.call<GcpOperation>(
        'POST',
        `${this.hosts.compute}/compute/v1/projects/${seg(project)}/global/operations/${seg(current.name)}/wait`,
        {},
      );
    }
    const errors = current?.error?.errors?.map((e) => e.message).join('; ');
    if (errors) throw new GcpRequestError(400, `operation ${current?.name}: ${errors}`);
  }

  /** An operation still running past its deadline fails the step (retried, then reported) —
   * never taken for done. */
  private unfinished(name: string | undefined, deadline: number): void {
    if (Date.now() > deadline)
      throw new GcpRequestError(
        504,
        `operation ${name ?? '?'} did not finish within ${Math.round((this.opts.operationTimeoutMs ?? 300_000) / 1000)} s`,
      );
  }

  // Cloud Run v2 jobs; writes answer long-running operations.
  private jobsUrl(project: string, region: string): string {
    return `${this.hosts.run}/v2/projects/${seg(project)}/locations/${seg(region)}/jobs`;
  }
  getJob(project: string, region: string, name: string) {
    return this.call<GcpJob>('GET', `${this.jobsUrl(project, region)}/${seg(name)}`);
  }
  async createJob(project: string, region: string, name: string, job: Omit<GcpJob, 'name'>) {
    await this.waitRun(
      await this.call<GcpOperation>('POST', `${this.jobsUrl(project, region)}?jobId=${seg(name)}`, job),
    );
  }
  async patchJob(project: string, region: string, name: string, job: Omit<GcpJob, 'name'>) {
    await this.waitRun(
      await this.call<GcpOperation>('PATCH', `${this.jobsUrl(project, region)}/${seg(name)}`, job),
    );
  }
  async deleteJob(project: string, region: string, name: string) {
    await this.waitRun(
      await this.call<GcpOperation>('DELETE', `${this.jobsUrl(project, region)}/${seg(name)}`),
    );
  }
  private async waitRun(op: GcpOperation | null): Promise<void> {
    let current = op;
    const deadline = Date.now() + (this.opts.operationTimeoutMs ?? 300_000);
    while (current && !current.done) {
      this.unfinished(current.name, deadline);
      await new Promise((r) => setTimeout(r, this.opts.pollIntervalMs ?? 500));
      current = await this.call<GcpOperation>(
        'GET',
        `${this.hosts.run}/v2/${current.name.split('/').map(seg).join('/')}`,
      );
    }
    if (current?.error?.message)
      throw new GcpRequestError(400, `operation ${current.name}: ${current.error.message}`);
  }
}

/** A GCP error as a Temporal failure: 4xx (not 408/429) permanent, everything else retried. */
export function gcpFailure(err: unknown, what: string): Error {
  if (err instanceof GcpRequestError) {
    const message = `${what}: ${err.message}`;
    if (err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) {
      return ApplicationFailure.nonRetryable(message, ErrorTypes.CloudRequestRejected);
    }
    return new Error(message);
  }
  const cause = (err as { cause?: { code?: string } }).cause;
  if (cause?.code === 'ECONNREFUSED')
    return new Error(`${what}: the Google API endpoint is unreachable (connection refused)`);
  return new Error(`${what}: ${(err as Error).message}`);
}
