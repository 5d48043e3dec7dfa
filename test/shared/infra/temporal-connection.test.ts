// Any Temporal: the connection comes from the environment configuration every Temporal SDK reads
// (@temporalio/envconfig) — TEMPORAL_* variables and temporal.toml profiles — with kumoss.yaml for
// what they leave out. Proven against the real dev server behind a TLS-terminating HTTP/2 proxy
// (ALPN h2), with and without a client certificate, and with an API key that must reach the server
// as a header and never appear in what Kumoss says about the connection.
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  connectNative,
  TemporalConfigError,
  temporalTarget,
  type TemporalTarget,
} from '../../../shared/infra/temporal-connection';
import type { DriftRoundResult } from '../../../shared/contracts';
import { driftRound } from '../../../workflows';
import { makeTlsFiles, startTlsProxy, type TlsFiles, type TlsProxy } from '../../support/tls-proxy';
import { newTestBed, roundInput, stack } from '../../support/stack';
import { startStackWorker } from '../../support/test-stack';

const kumoss = { address: '127.0.0.1:7233', namespace: 'default' };

/** Connects and asks the server for its system info (fails when the handshake is refused). */
async function reach(connection: TemporalTarget['connection']): Promise<void> {
  const c = await Connection.connect({ ...connection, connectTimeout: '3s' });
  try {
    await c.workflowService.getSystemInfo({});
  } finally {
    await c.close();
  }
}

describe('the Temporal connection from the environment configuration', () => {
  it('takes kumoss.yaml when the environment says nothing, TEMPORAL_* over it', () => {
    expect(temporalTarget(kumoss, {}).describe).toEqual({
      address: '127.0.0.1:7233',
      namespace: 'default',
      tls: false,
      mtls: false,
      api_key: false,
    });
    const t = temporalTarget(kumoss, {
      TEMPORAL_ADDRESS: 'kumoss.a1b2c.tmprl.cloud:7233',
      TEMPORAL_NAMESPACE: 'kumoss.a1b2c',
      TEMPORAL_API_KEY: 'key-never-logged',
    });
    expect(t.connection).toMatchObject({
      address: 'kumoss.a1b2c.tmprl.cloud:7233',
      apiKey: 'key-never-logged',
      tls: true,
    });
    // An API key turns TLS on (as Temporal Cloud wants); what is said about it holds no secret.
    expect(t.describe).toEqual({
      address: 'kumoss.a1b2c.tmprl.cloud:7233',
      namespace: 'kumoss.a1b2c',
      tls: true,
      mtls: false,
      api_key: true,
    });
    expect(JSON.stringify(t.describe)).not.toContain('key-never-logged');
  });

  it('reads a temporal.toml profile only when asked for, and says which profile is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-envconfig-'));
    const file = join(dir, 'temporal.toml');
    writeFileSync(
      file,
      [
        '[profile.default]',
        'address = "default.example:7233"',
        '',
        '[profile.prod]',
        'address = "prod.example:7233"',
        'namespace = "kumoss-prod"',
        'api_key = "prod-key"',
        '',
      ].join('\n'),
    );
    // The file in its default place (XDG_CONFIG_HOME/temporalio/temporal.toml) is not read unasked.
    const xdg = mkdtempSync(join(tmpdir(), 'kumoss-xdg-'));
    mkdirSync(join(xdg, 'temporalio'));
    writeFileSync(
      join(xdg, 'temporalio', 'temporal.toml'),
      '[profile.default]\naddress = "elsewhere:7233"\n',
    );
    expect(temporalTarget(kumoss, { XDG_CONFIG_HOME: xdg, HOME: xdg }).address).toBe('127.0.0.1:7233');
    expect(temporalTarget(kumoss, { TEMPORAL_CONFIG_FILE: file }).address).toBe('default.example:7233');
    const prod = temporalTarget(kumoss, { TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'prod' });
    expect(prod.describe).toEqual({
      address: 'prod.example:7233',
      namespace: 'kumoss-prod',
      tls: true,
      mtls: false,
      api_key: true,
      profile: 'prod',
    });
    // The environment still wins over the file.
    expect(
      temporalTarget(kumoss, {
        TEMPORAL_CONFIG_FILE: file,
        TEMPORAL_PROFILE: 'prod',
        TEMPORAL_ADDRESS: 'override:7233',
      }).address,
    ).toBe('override:7233');
    expect(() => temporalTarget(kumoss, { TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'staging' })).toThrow(
      TemporalConfigError,
    );
    expect(() => temporalTarget(kumoss, { TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'staging' })).toThrow(
      /profile staging .*temporal\.toml.*'staging' not found/,
    );
  });
});

describe('the real dev server behind a TLS-terminating proxy', () => {
  let tls: TlsFiles;
  const proxies: TlsProxy[] = [];
  beforeAll(async () => {
    tls = await makeTlsFiles(mkdtempSync(join(tmpdir(), 'kumoss-tls-')));
  });
  afterAll(async () => {
    for (const p of proxies) await p.close();
  });
  const proxy = async (requireClientCert: boolean) => {
    const p = await startTlsProxy({ upstream: stack().temporalAddress, tls, requireClientCert });
    proxies.push(p);
    return p;
  };

  it('TLS with the server CA and an API key: the key reaches the server as a bearer header', async () => {
    const p = await proxy(false);
    const t = temporalTarget(kumoss, {
      TEMPORAL_ADDRESS: p.address,
      TEMPORAL_NAMESPACE: stack().namespace,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: tls.caPath,
      TEMPORAL_API_KEY: 'kumoss-test-api-key',
    });
    const client = await connectClient(t);
    const native = await connectNative(t);
    try {
      const ns = await client.workflowService.describeNamespace({ namespace: stack().namespace });
      expect(ns.namespaceInfo?.name).toBe(stack().namespace);
      const info = await native.workflowService.getSystemInfo({});
      expect(info.serverVersion).toMatch(/^\d+\.\d+/);
    } finally {
      await client.close();
      await native.close();
    }
    expect(p.requests.length).toBeGreaterThanOrEqual(2);
    for (const h of p.requests) expect(h.authorization).toBe('Bearer kumoss-test-api-key');
    // Every stream came over TLS with ALPN h2 (an HTTP/2 server only).
    expect(p.requests.every((h) => h[':scheme'] === 'https')).toBe(true);
  });

  it('TLS without the CA fails to connect (the certificate is checked)', async () => {
    const p = await proxy(false);
    const t = temporalTarget(kumoss, { TEMPORAL_ADDRESS: p.address, TEMPORAL_TLS: 'true' });
    await expect(reach(t.connection)).rejects.toThrow();
    expect(p.requests).toHaveLength(0);
  });

  it('mTLS: refused without a client certificate; a worker and a client with one run a round', async () => {
    const p = await proxy(true);
    const env = {
      TEMPORAL_ADDRESS: p.address,
      TEMPORAL_NAMESPACE: stack().namespace,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: tls.caPath,
    };
    const without = temporalTarget(kumoss, env);
    expect(without.describe.mtls).toBe(false);
    await expect(reach(without.connection)).rejects.toThrow();
    expect(p.refused).toBeGreaterThan(0);
    expect(p.requests).toHaveLength(0);

    const t = temporalTarget(kumoss, {
      ...env,
      TEMPORAL_TLS_CLIENT_CERT_PATH: tls.clientCert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: tls.clientKey,
    });
    expect(t.describe).toMatchObject({ tls: true, mtls: true });
    const queue = `mtls-${randomUUID().slice(0, 8)}`;
    const sw = await startStackWorker(stack(), queue, { temporal: t });
    const bed = await newTestBed();
    try {
      await bed.inject('attribute');
      const result: DriftRoundResult = await sw.client.workflow.execute(driftRound, {
        taskQueue: queue,
        workflowId: `mtls-${randomUUID()}`,
        args: [roundInput(bed.repoUrl)],
      });
      expect(result).toMatchObject({ status: 'completed', outcome: 'Succeeded' });
    } finally {
      await sw.stop();
      await bed.destroy();
    }
    // The worker's polls and the client's calls all went through the proxy.
    const paths = new Set(p.requests.map((h) => String(h[':path']).split('/').pop()));
    for (const rpc of ['PollWorkflowTaskQueue', 'PollActivityTaskQueue', 'StartWorkflowExecution']) {
      expect(paths).toContain(rpc);
    }
  });
});
