// The GCP client's credentials come from google-auth-library's Application Default Credentials: here
// a workload identity federation file in GOOGLE_APPLICATION_CREDENTIALS (the form a CI job or a
// workload on another cloud uses), exchanged at the loopback's Security Token Service for access
// tokens that expire — cached while they last, fetched again before they run out.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { GcpClient, gcpFailure } from '../../activities/runners/clouds';
import { federationCredential, startGcpLoopback, type GcpLoopback } from '../support/gcp-loopback';

// google-auth-library refreshes a token five minutes before it expires: a lifetime of 5 min + 1 s
// is one second of reuse, then a refresh.
const LIFETIME_S = 301;

describe('GCP credentials through google-auth-library (Application Default Credentials)', () => {
  let gcp: GcpLoopback;
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-gcp-auth-'));
  const subjectToken = `subject-${process.pid}-${Date.now()}`;
  const before = process.env.GOOGLE_APPLICATION_CREDENTIALS;

  /** A workload identity federation credential file whose subject token is read from `tokenFile`. */
  const credentialFile = (name: string, tokenFile: string): string => {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(federationCredential(gcp, tokenFile)));
    return path;
  };

  beforeAll(async () => {
    gcp = await startGcpLoopback({
      token: 'unused-static-token',
      sts: { subjectToken, lifetimeSeconds: LIFETIME_S },
    });
    writeFileSync(join(dir, 'subject-token'), subjectToken);
    writeFileSync(join(dir, 'wrong-token'), 'not-the-subject-token');
  });
  afterEach(() => {
    if (before === undefined) delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    else process.env.GOOGLE_APPLICATION_CREDENTIALS = before;
  });
  afterAll(async () => {
    await gcp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('exchanges the federated identity for an access token, reuses it while it lasts and fetches a new one before it expires', async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = credentialFile('good', join(dir, 'subject-token'));
    // As the worker builds it when GOOGLE_OAUTH_ACCESS_TOKEN is not set.
    const client = new GcpClient({ endpoint: gcp.url });
    const email = client.serviceAccountEmail('kumoss-auth', 'runner-auth');
    const apiCalls = () => gcp.requests.filter((r) => r.path !== '/v1/token');

    expect(await client.getServiceAccount('kumoss-auth', email)).toBeNull();
    await client.createServiceAccount('kumoss-auth', 'runner-auth', { displayName: 'r', description: 'd' });
    // Two calls, one exchange: the token is cached.
    expect(gcp.issued).toHaveLength(1);
    expect(apiCalls().map((r) => r.token)).toEqual([gcp.issued[0], gcp.issued[0]]);
    const firstIssued = Date.now();

    // Once inside the refresh window, the next call gets a new token first.
    await vi.waitFor(() => expect(Date.now() - firstIssued).toBeGreaterThan(1_100), {
      timeout: 5_000,
      interval: 50,
    });
    expect((await client.getServiceAccount('kumoss-auth', email))?.email).toBe(email);
    expect(gcp.issued).toHaveLength(2);
    expect(apiCalls().at(-1)?.token).toBe(gcp.issued[1]);
  });

  it('a credential the token service refuses fails the step with its reason, and no token in the message', async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = credentialFile('wrong', join(dir, 'wrong-token'));
    const calls = gcp.requests.length;
    const err = await new GcpClient({ endpoint: gcp.url })
      .getJob('kumoss-auth', 'europe-west1', 'runner')
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err?.message).toMatch(/subject token could not be verified/);
    const failure = gcpFailure(err, 'runner_cloud_run_job');
    expect(failure.message).toMatch(
      /^runner_cloud_run_job: GET \/v2\/projects\/kumoss-auth\/locations\/europe-west1\/jobs\/runner: /,
    );
    expect(failure.message).not.toContain('not-the-subject-token');
    // Only the token service was asked; no API request went out without credentials.
    expect(gcp.requests.slice(calls).map((r) => r.path)).toEqual(['/v1/token']);
  });

  it('encodes path parameters: a name with a slash stays one segment', async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = credentialFile('good2', join(dir, 'subject-token'));
    expect(await new GcpClient({ endpoint: gcp.url }).getInstanceTemplate('kumoss-auth', 'a/b')).toBeNull();
    expect(gcp.requests.at(-1)?.path).toBe('/compute/v1/projects/kumoss-auth/global/instanceTemplates/a%2Fb');
  });
});
