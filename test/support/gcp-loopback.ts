// A loopback stand-in for the Google Cloud APIs the runner DAG uses (Google Cloud cannot be reached
// from here): the IAM v1 service-account, Compute v1 instance-template and Cloud Run v2 job REST
// resources, with Google's paths, JSON shapes, error bodies and long-running operations, behind a
// bearer token. It keeps a log of every request so tests can prove what was (not) mutated. With
// `sts`, it is also Google's Security Token Service (`POST /v1/token`, RFC 8693 token exchange, as
// workload identity federation uses it): a caller with the expected subject token gets an access
// token that the APIs accept until it expires.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GcpLoopback {
  url: string;
  /** Every request: method and path, and the access token it carried (API requests). */
  requests: { method: string; path: string; token?: string }[];
  /** Access tokens the token service issued, in order. */
  issued: string[];
  close(): Promise<void>;
}

/** Machine types a zone offers (a request for another is rejected, as GCE does). */
const MACHINE_TYPES = new Set([
  'e2-micro',
  'e2-small',
  'e2-medium',
  'e2-standard-2',
  'e2-standard-4',
  'n2-standard-2',
]);

interface ServiceAccount {
  name: string;
  projectId: string;
  uniqueId: string;
  email: string;
  displayName: string;
  description: string;
  disabled: boolean;
}

function googleError(res: ServerResponse, code: number, status: string, message: string): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      error: { code, message, status, errors: [{ message, domain: 'global', reason: status }] },
    }),
  );
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function send(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

/**
 * A workload identity federation configuration (google-auth-library's `external_account`) that
 * reads its subject token from `tokenFile` and exchanges it at `gcp`'s token service.
 */
export function federationCredential(gcp: { url: string }, tokenFile: string): Record<string, unknown> {
  return {
    type: 'external_account',
    audience: '//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/kumoss/providers/ci',
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: `${gcp.url}/v1/token`,
    credential_source: { file: tokenFile },
  };
}

export interface StsOptions {
  /** The subject token (an identity provider's token, read from a file by the caller). */
  subjectToken: string;
  /** Lifetime of the access tokens it issues. */
  lifetimeSeconds: number;
}

export async function startGcpLoopback(opts: { token: string; sts?: StsOptions }): Promise<GcpLoopback> {
  const issued: string[] = [];
  const expiry = new Map<string, number>(); // issued access token → epoch ms
  const accounts = new Map<string, ServiceAccount>(); // key: email
  const templates = new Map<string, Record<string, unknown>>(); // key: project/name
  const jobs = new Map<string, Record<string, unknown>>(); // key: project/region/name
  const requests: { method: string; path: string; token?: string }[] = [];

  const computeOp = (project: string, type: string, target: string) => ({
    kind: 'compute#operation',
    id: String(Math.floor(Math.random() * 1e15)),
    name: `operation-${randomUUID()}`,
    operationType: type,
    targetLink: `https://compute.googleapis.com/compute/v1/projects/${project}/global/instanceTemplates/${target}`,
    status: 'DONE',
    progress: 100,
  });
  const runOp = (project: string, region: string, response: unknown) => ({
    name: `projects/${project}/locations/${region}/operations/${randomUUID()}`,
    done: true,
    response,
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://loopback');
    const method = req.method ?? 'GET';
    const path = url.pathname;
    if (opts.sts && path === '/v1/token' && method === 'POST') {
      requests.push({ method, path });
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const refuse = (description: string) => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'invalid_grant', error_description: description }));
      };
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:token-exchange')
        return refuse('Unsupported grant type.');
      if (form.get('subject_token') !== opts.sts.subjectToken)
        return refuse('The subject token could not be verified.');
      if (!(form.get('scope') ?? '').split(' ').includes('https://www.googleapis.com/auth/cloud-platform'))
        return refuse('The requested scope is not allowed.');
      const accessToken = `ya29.loopback-${randomUUID()}`;
      issued.push(accessToken);
      expiry.set(accessToken, Date.now() + opts.sts.lifetimeSeconds * 1000);
      return send(res, {
        access_token: accessToken,
        issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        token_type: 'Bearer',
        expires_in: opts.sts.lifetimeSeconds,
      });
    }
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    requests.push({ method, path, ...(bearer ? { token: bearer } : {}) });
    const valid = bearer === opts.token || (bearer !== undefined && (expiry.get(bearer) ?? 0) > Date.now());
    if (!valid) {
      return googleError(res, 401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.');
    }
    let m: RegExpExecArray | null;

    // IAM v1
    if ((m = /^\/v1\/projects\/([^/]+)\/serviceAccounts$/.exec(path)) && method === 'POST') {
      const project = m[1] as string;
      const body = await readJson(req);
      const accountId = str(body.accountId);
      const sa = (body.serviceAccount ?? {}) as { displayName?: string; description?: string };
      if (!/^[a-z]([-a-z0-9]{4,28}[a-z0-9])$/.test(accountId)) {
        return googleError(res, 400, 'INVALID_ARGUMENT', `Invalid account ID ${accountId}.`);
      }
      const email = `${accountId}@${project}.iam.gserviceaccount.com`;
      if (accounts.has(email))
        return googleError(
          res,
          409,
          'ALREADY_EXISTS',
          `Service account ${accountId} already exists within project projects/${project}.`,
        );
      const account: ServiceAccount = {
        name: `projects/${project}/serviceAccounts/${email}`,
        projectId: project,
        uniqueId: String(Math.floor(Math.random() * 1e20)),
        email,
        displayName: sa.displayName ?? '',
        description: sa.description ?? '',
        disabled: false,
      };
      accounts.set(email, account);
      return send(res, account);
    }
    if ((m = /^\/v1\/projects\/([^/]+)\/serviceAccounts\/([^/:]+)(?::(enable|disable))?$/.exec(path))) {
      const email = decodeURIComponent(m[2] as string);
      const account = accounts.get(email);
      if (!account) return googleError(res, 404, 'NOT_FOUND', `Unknown service account`);
      if (m[3] && method === 'POST') {
        account.disabled = m[3] === 'disable';
        return send(res, {});
      }
      if (method === 'GET') return send(res, account);
      if (method === 'PATCH') {
        const body = await readJson(req);
        const patch = (body.serviceAccount ?? {}) as { displayName?: string; description?: string };
        for (const field of str(body.updateMask).split(',')) {
          if (field === 'displayName' && patch.displayName !== undefined)
            account.displayName = patch.displayName;
          if (field === 'description' && patch.description !== undefined)
            account.description = patch.description;
        }
        return send(res, account);
      }
      if (method === 'DELETE') {
        accounts.delete(email);
        return send(res, {});
      }
    }

    // Compute v1 instance templates
    if (
      (m = /^\/compute\/v1\/projects\/([^/]+)\/global\/instanceTemplates$/.exec(path)) &&
      method === 'POST'
    ) {
      const project = m[1] as string;
      const body = await readJson(req);
      const name = str(body.name);
      const props = (body.properties ?? {}) as {
        machineType?: string;
        serviceAccounts?: { email: string }[];
      };
      if (templates.has(`${project}/${name}`)) {
        return googleError(
          res,
          409,
          'alreadyExists',
          `The resource 'projects/${project}/global/instanceTemplates/${name}' already exists`,
        );
      }
      if (!MACHINE_TYPES.has(props.machineType ?? '')) {
        return googleError(
          res,
          400,
          'invalid',
          `Invalid value for field 'resource.properties.machineType': '${props.machineType ?? ''}'. Machine type with name '${props.machineType ?? ''}' does not exist.`,
        );
      }
      for (const sa of props.serviceAccounts ?? []) {
        if (!accounts.has(sa.email)) {
          return googleError(
            res,
            400,
            'invalid',
            `The resource 'projects/${project}/serviceAccounts/${sa.email}' was not found`,
          );
        }
      }
      templates.set(`${project}/${name}`, {
        kind: 'compute#instanceTemplate',
        id: String(Math.floor(Math.random() * 1e15)),
        name,
        selfLink: `https://compute.googleapis.com/compute/v1/projects/${project}/global/instanceTemplates/${name}`,
        properties: body.properties,
      });
      return send(res, computeOp(project, 'insert', name));
    }
    if ((m = /^\/compute\/v1\/projects\/([^/]+)\/global\/instanceTemplates\/([^/]+)$/.exec(path))) {
      const [project, name] = [m[1] as string, m[2] as string];
      const t = templates.get(`${project}/${name}`);
      if (!t) {
        return googleError(
          res,
          404,
          'notFound',
          `The resource 'projects/${project}/global/instanceTemplates/${name}' was not found`,
        );
      }
      if (method === 'GET') return send(res, t);
      if (method === 'DELETE') {
        templates.delete(`${project}/${name}`);
        return send(res, computeOp(project, 'delete', name));
      }
    }
    if ((m = /^\/compute\/v1\/projects\/([^/]+)\/global\/operations\/([^/]+)\/wait$/.exec(path))) {
      return send(res, { kind: 'compute#operation', name: m[2], status: 'DONE', progress: 100 });
    }

    // Cloud Run v2 jobs
    if ((m = /^\/v2\/projects\/([^/]+)\/locations\/([^/]+)\/jobs$/.exec(path)) && method === 'POST') {
      const [project, region] = [m[1] as string, m[2] as string];
      const name = url.searchParams.get('jobId') ?? '';
      const key = `${project}/${region}/${name}`;
      if (jobs.has(key)) return googleError(res, 409, 'ALREADY_EXISTS', `Resource '${name}' already exists.`);
      const body = await readJson(req);
      const job = {
        ...body,
        name: `projects/${project}/locations/${region}/jobs/${name}`,
        uid: randomUUID(),
      };
      jobs.set(key, job);
      return send(res, runOp(project, region, job));
    }
    if ((m = /^\/v2\/projects\/([^/]+)\/locations\/([^/]+)\/jobs\/([^/]+)$/.exec(path))) {
      const [project, region, name] = [m[1] as string, m[2] as string, m[3] as string];
      const key = `${project}/${region}/${name}`;
      const job = jobs.get(key);
      if (!job) {
        return googleError(
          res,
          404,
          'NOT_FOUND',
          `Resource '${name}' of kind 'JOB' in region '${region}' in project '${project}' does not exist.`,
        );
      }
      if (method === 'GET') return send(res, job);
      if (method === 'PATCH') {
        const body = await readJson(req);
        const updated = { ...job, ...body, name: job.name, uid: job.uid };
        jobs.set(key, updated);
        return send(res, runOp(project, region, updated));
      }
      if (method === 'DELETE') {
        jobs.delete(key);
        return send(res, runOp(project, region, job));
      }
    }
    googleError(res, 404, 'NOT_FOUND', `No such method: ${method} ${path}`);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => googleError(res, 500, 'INTERNAL', String(err)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    issued,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
