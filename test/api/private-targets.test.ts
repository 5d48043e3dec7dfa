// Repository URLs and webhook endpoints on private, loopback or link-local addresses (the cloud's
// metadata service, the worker's own services) are refused unless the configuration allows them —
// at the API where they enter, and again by the worker before each webhook delivery.
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookActivities } from '../../activities/webhooks';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { findUserByToken } from '../../shared/infra/db/users';
import { createWebhook, listDeliveries } from '../../shared/infra/db/webhooks';
import {
  checkTarget,
  isNonPublicAddress,
  pinnedLookup,
  refusedTarget,
} from '../../shared/infra/network-targets';
import { roleTokens, startTestApi, type TestApi } from '../support/api';
import { stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('non-public addresses', () => {
  it('are private, loopback, link-local, carrier-grade NAT, reserved or mapped forms of them', () => {
    for (const ip of [
      '10.1.2.3',
      '172.31.255.1',
      '192.168.0.10',
      '127.0.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:169.254.169.254',
    ])
      expect(isNonPublicAddress(ip), ip).toBe(true);
    for (const ip of ['8.8.8.8', '140.82.112.3', '2606:4700::1111', '::ffff:1.1.1.1'])
      expect(isNonPublicAddress(ip), ip).toBe(false);
  });

  it('are refused by name too, unless an origin or host is allowed', async () => {
    expect(await refusedTarget('https://localhost:8443/a.git', { allowed: [] })).toMatch(
      /^localhost resolves to (127\.0\.0\.1|::1), a private, loopback or link-local address/,
    );
    expect(await refusedTarget('https://127.0.0.1:8443/a.git', { allowed: ['https://127.0.0.1:8443'] })).toBe(
      undefined,
    );
    // An allowed origin is that origin only: another port of the same host is not.
    expect(
      await refusedTarget('https://127.0.0.1:22/a.git', { allowed: ['https://127.0.0.1:8443'] }),
    ).toMatch(/^127\.0\.0\.1 is a private/);
    expect(await refusedTarget('https://10.0.0.5/a.git', { allowed: ['10.0.0.5'] })).toBe(undefined);
  });
});

describe('a checked target is connected to at the address checked', () => {
  it('checkTarget answers the address, and a request through pinnedLookup goes there whatever the name resolves to', async () => {
    const hits: string[] = [];
    const server = createServer((req, res) => {
      hits.push(req.headers.host ?? '');
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      // A public name is checked once; the delivery uses that answer (here: a name no resolver
      // knows, so only the pinned address can reach anything).
      const pinned = pinnedLookup({ address: '127.0.0.1', family: 4 });
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `http://kumoss-rebinding.invalid:${port}/hook`,
          { method: 'POST', lookup: pinned },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end('{}');
      });
      expect(status).toBe(200);
      expect(hits).toEqual([`kumoss-rebinding.invalid:${port}`]);
      expect(await checkTarget(`http://127.0.0.1:${port}/`, { allowed: [] })).toMatchObject({
        refused: expect.stringMatching(/^127\.0\.0\.1 is a private/) as unknown,
      });
      expect(await checkTarget('https://8.8.8.8/hook', { allowed: [] })).toEqual({
        address: { address: '8.8.8.8', family: 4 },
      });
    } finally {
      server.close();
    }
  });
});

describe('private targets at the API and at delivery', () => {
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let tokens: Awaited<ReturnType<typeof roleTokens>>;
  let receiver: Server;
  let receiverUrl: string;
  const received: string[] = [];

  beforeAll(async () => {
    h = await temporalHarness('private-targets');
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'private-targets');
    receiver = createServer((req, res) => {
      received.push(req.url ?? '');
      req.resume();
      res.end('internal admin page');
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    // As a deployment configures it: only its own git host is allowed among private targets.
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      targets: { allowed: [new URL(stack().gitHostUrl).origin] },
    });
  });
  afterAll(async () => {
    api?.close();
    receiver?.close();
    await db?.destroy();
    await h?.close();
  });

  it('refuses a repository URL or webhook on a non-public address with a 400 naming the field; nothing is created', async () => {
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no user');
    const first = (repository_url: string) =>
      api.call('POST', '/api/v1/drift/full', tokens.devops, {
        repository_url,
        cloud: 'aws',
        scope_id: 'acct',
        text: 'Reconcile.',
      });
    const metadata = await first('https://169.254.169.254/latest/meta-data.git');
    expect(metadata.status).toBe(400);
    expect(metadata.body.error).toEqual({
      code: 'invalid_request',
      message:
        'repository_url: 169.254.169.254 is a private, loopback or link-local address; such targets are refused unless security.private_targets_allowed names them',
    });
    expect((await first('https://10.20.30.40:2375/x.git')).status).toBe(400);
    const stackBody = {
      name: `private-${Date.now()}`,
      repository_url: `https://127.0.0.1:${new URL(receiverUrl).port}/x.git`,
      cloud: 'aws',
      scope_id: 'acct',
      schedule: { interval_minutes: 60 },
    };
    const refusedStack = await api.call('POST', '/api/v1/stacks', tokens.devops, stackBody);
    expect(refusedStack.status).toBe(400);
    expect((refusedStack.body.error as { message: string }).message).toMatch(
      /^repository_url: 127\.0\.0\.1 is a private/,
    );
    const hook = await api.call('POST', '/api/v1/webhooks', tokens.devops, {
      url: `${receiverUrl}/hook`,
      events: ['drift.detected'],
    });
    expect(hook.status).toBe(400);
    expect((hook.body.error as { message: string }).message).toMatch(/^url: 127\.0\.0\.1 is a private/);
    const sessions = await db
      .selectFrom('sessions')
      .select('session_id')
      .where('organization_uuid', '=', devops.organization_uuid)
      .execute();
    expect(sessions).toEqual([]);
    const hooks = await api.call('GET', '/api/v1/webhooks', tokens.devops);
    expect(hooks.body.webhooks).toEqual([]);
    expect(received).toEqual([]);
  });

  it('a webhook registered before is not contacted once its target is not allowed; the log keeps no remote body', async () => {
    const devops = await findUserByToken(db, tokens.devops);
    if (!devops) throw new Error('no user');
    const { endpoint } = await createWebhook(db, devops.organization_uuid, {
      url: `${receiverUrl}/hook`,
      events: ['drift.detected'],
    });
    const strict = createWebhookActivities({ db, targets: { allowed: [] } });
    const delivery_id = `run-${randomUUID()}:drift.detected`;
    await expect(
      strict.deliverWebhook({
        organization_uuid: devops.organization_uuid,
        delivery_id,
        event: 'drift.detected',
        data: {},
        at: new Date().toISOString(),
      }),
    ).rejects.toThrow(/refused: 127\.0\.0\.1 is a private/);
    expect(received).toEqual([]);
    const [attempt] = await listDeliveries(db, devops.organization_uuid, endpoint.endpoint_uuid);
    expect(attempt).toMatchObject({ status_code: null });
    expect(JSON.stringify(attempt)).not.toContain('internal admin page');

    // Allowed, it is delivered, and still only the status is kept.
    const open = createWebhookActivities({ db, targets: { allowed: ['127.0.0.1'] } });
    await open.deliverWebhook({
      organization_uuid: devops.organization_uuid,
      delivery_id: `${delivery_id}-2`,
      event: 'drift.detected',
      data: {},
      at: new Date().toISOString(),
    });
    expect(received).toEqual(['/hook']);
    const log = await listDeliveries(db, devops.organization_uuid, endpoint.endpoint_uuid);
    expect(log.some((d) => d.status_code === 200)).toBe(true);
    expect(JSON.stringify(log)).not.toContain('internal admin page');
  });
});
