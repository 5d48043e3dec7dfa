// A Google long-running operation that never finishes fails the step with a clear error — it is
// never taken for done (before: 60 polls, then silence and success).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gcpFailure, GcpClient, GcpRequestError } from '../../activities/runners/clouds';

describe('Google operations that never finish', () => {
  let server: Server;
  let endpoint: string;
  let polls = 0;

  beforeAll(async () => {
    // Cloud Run v2 and Compute answer with operations that stay running, as a stuck one does.
    server = createServer((req, res) => {
      req.resume();
      res.setHeader('content-type', 'application/json');
      if (req.url?.includes('/operations/')) polls++;
      if (req.url?.startsWith('/compute/'))
        res.end(JSON.stringify({ kind: 'compute#operation', name: 'op-compute', status: 'RUNNING' }));
      else res.end(JSON.stringify({ name: 'projects/p/locations/r/operations/op-run', done: false }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const client = () =>
    new GcpClient({ endpoint, token: 'kumoss-test', operationTimeoutMs: 1_500, pollIntervalMs: 100 });

  it('a Cloud Run job write whose operation never finishes fails with the operation named, as a retryable error', async () => {
    polls = 0;
    const err = await client()
      .createJob('p', 'r', 'runner', { template: { template: { containers: [{ image: 'x' }] } } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(GcpRequestError);
    expect((err as GcpRequestError).status).toBe(504);
    expect((err as Error).message).toBe(
      'operation projects/p/locations/r/operations/op-run did not finish within 2 s',
    );
    expect(polls).toBeGreaterThan(3);
    // Retried by Temporal (not a 4xx), then reported with the step.
    expect(gcpFailure(err, 'drift_repair_cloud_run_job')).not.toHaveProperty('nonRetryable', true);
  });

  it('a Compute instance template delete whose operation never finishes fails the same way', async () => {
    await expect(client().deleteInstanceTemplate('p', 'tpl')).rejects.toThrow(
      'operation op-compute did not finish within 2 s',
    );
  });
});
