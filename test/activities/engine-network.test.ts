// The engine's network (activities/egress.ts, worker/egress-relay): a root that points its
// provider, its backend and its module sources at what the worker reaches — the object store,
// PostgreSQL, Temporal, cloud metadata, a loopback service — reaches none of it, and the run says
// which destination was refused; the run's own endpoints (its cloud's emulator, its state server,
// the test cloud's API) stay reachable. Real terraform, the real kumoss/aws provider, real
// bubblewrap, real moto and the real object store.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineClient, EngineError } from '../../activities/engine';
import { EgressGate, parseEgressAllow, refusedDials } from '../../activities/egress';
import { waitForTool } from '../../shared/infra/tools.mjs';
import { engineDeps, stack } from '../support/stack';

const AWS_ROOT = (endpoint: string, bucket: string) => `terraform {
  required_providers {
    aws = {
      source  = "kumoss/aws"
      version = "0.1.0"
    }
  }
}
provider "aws" {
  region = "us-east-1"
  endpoints {
    s3 = ${JSON.stringify(endpoint)}
  }
}
resource "aws_s3_bucket" "b" {
  bucket = ${JSON.stringify(bucket)}
}
`;

describe("the engine's network: its own namespace, out only through the egress gate", () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-network-'));
  /** A service on the worker's loopback that no run names (where the API, a database, … would be). */
  let service: Server;
  let servicePort = 0;
  const reached: string[] = [];

  beforeAll(async () => {
    service = createServer((req, res) => {
      reached.push(`${req.method ?? ''} ${req.url ?? ''}`);
      res.end('{}');
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    servicePort = (service.address() as AddressInfo).port;
    await waitForTool('provider-aws');
  });
  afterAll(() => new Promise<void>((resolve) => service.close(() => resolve())));

  const run = (files: Record<string, string>) => {
    const runDir = join(base, `session-${Math.random().toString(36).slice(2, 8)}`);
    const root = join(runDir, 'repo');
    mkdirSync(join(root, '.git'), { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
    // An AWS run: its emulator (moto) is its cloud endpoint, its credentials its own.
    const engine = new EngineClient({
      ...engineDeps('terraform', stack().awsEndpoint),
      workdir: root,
      runDir,
      scopeId: 'network-test',
    });
    return { engine, root };
  };

  const hostPort = (raw: string) => {
    const u = new URL(raw.includes('://') ? raw : `x://${raw}`);
    return `${u.hostname}:${u.port}`;
  };

  it("a provider's endpoint at the object store, PostgreSQL, Temporal or cloud metadata fails, naming the destination", async () => {
    const s = stack();
    const targets = {
      'the object store': `http://${hostPort(s.s3Endpoint)}`,
      PostgreSQL: `http://${hostPort(s.postgresUrl)}`,
      Temporal: `http://${hostPort(s.temporalAddress)}`,
      'cloud metadata': 'http://169.254.169.254',
      'a loopback service': `http://127.0.0.1:${servicePort}`,
    };
    for (const [what, endpoint] of Object.entries(targets)) {
      const { engine } = run({
        'main.tf': AWS_ROOT(endpoint, `kumoss-net-${Math.random().toString(36).slice(2, 8)}`),
      });
      await engine.init();
      const err = await engine.apply().catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(EngineError);
      const destination = endpoint === 'http://169.254.169.254' ? '169.254.169.254:80' : hostPort(endpoint);
      expect((err as EngineError).message, what).toContain(`the engine's network refused ${destination}`);
      expect((err as EngineError).output, what).toContain(`Kumoss egress refused ${destination}`);
    }
    expect(reached).toEqual([]);
  });

  it("the run's own cloud endpoint is reachable: the same root against its emulator applies", async () => {
    const { engine } = run({
      'main.tf': AWS_ROOT(stack().awsEndpoint, `kumoss-net-ok-${Math.random().toString(36).slice(2, 8)}`),
    });
    await engine.init();
    await engine.apply();
  });

  it('an http backend at a loopback service and a module source on a loopback port fail at init, naming it', async () => {
    const backend = run({
      'main.tf': `terraform {
  backend "http" {
    address = "http://127.0.0.1:${servicePort}/api/v1/state"
  }
}
`,
    });
    const b = await backend.engine.init().catch((e: unknown) => e);
    expect(b).toBeInstanceOf(EngineError);
    expect((b as EngineError).message).toContain(`the engine's network refused 127.0.0.1:${servicePort}`);
    const module = run({
      'main.tf': `module "m" {
  source = "http://127.0.0.1:${servicePort}/m.zip"
}
`,
    });
    const m = await module.engine.init().catch((e: unknown) => e);
    expect(m).toBeInstanceOf(EngineError);
    expect((m as EngineError).output).toContain(`127.0.0.1:${servicePort}`);
    expect((m as EngineError).message).toContain(`the engine's network refused 127.0.0.1:${servicePort}`);
    expect(reached).toEqual([]);
  });

  it("the proxy lets a cloud's domain through only on a public address, and what is named exactly", async () => {
    const gate = await EgressGate.open({
      endpoints: [{ host: '10.1.2.3', port: 8443 }],
      domains: ['localhost', 'amazonaws.com'],
    });
    try {
      // A name of an allowed domain that resolves to loopback is still refused.
      expect(await gate.decide({ host: 'localhost', port: 80 })).toEqual({
        refused: 'localhost:80 (resolves to 127.0.0.1, not a public address)',
      });
      expect(await gate.decide({ host: '169.254.169.254', port: 80 })).toEqual({
        refused: '169.254.169.254:80 (not a destination of this run)',
      });
      expect(await gate.decide({ host: 'evil.example', port: 443 })).toEqual({
        refused: 'evil.example:443 (not a destination of this run)',
      });
      expect(await gate.decide({ host: '10.1.2.3', port: 8443 })).toEqual({ address: '10.1.2.3' });
      expect(await gate.decide({ host: '10.1.2.3', port: 22 })).toHaveProperty('refused');
    } finally {
      await gate.close();
    }
  });
});

describe('egress rules', () => {
  it('reads engine.egress_allow entries and refuses what is none of them', () => {
    expect(
      parseEgressAllow(['127.0.0.1:9000', 'https://vault.internal:8200', '.example.com', '*.corp.net']),
    ).toEqual({
      endpoints: [
        { host: '127.0.0.1', port: 9000 },
        { host: 'vault.internal', port: 8200 },
      ],
      domains: ['example.com', 'corp.net'],
    });
    expect(() => parseEgressAllow(['example.com'])).toThrow(/neither host:port/);
  });

  it("finds the engine's refused dials in its output", () => {
    expect(
      refusedDials(
        'Error: dial tcp 127.0.0.1:5432: connect: connection refused\n' +
          'dial tcp 10.0.0.1:443: connect: network is unreachable\n' +
          'source code from "http://127.0.0.1:1/m.zip": dial tcp\n127.0.0.1:1: connect: connection\nrefused\n' +
          'dial tcp 127.0.0.1:5432: connect: connection refused',
      ),
    ).toEqual(['127.0.0.1:5432', '10.0.0.1:443', '127.0.0.1:1']);
  });
});
