// Encrypted payloads: with KUMOSS_PAYLOAD_KEY the worker and client encrypt every payload (AES-256-
// GCM), so the Temporal server's history holds ciphertext only; the API's codec endpoint (what the
// Web UI calls) decrypts them for an authenticated caller or the Web UI's origin.
import { randomBytes, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENCRYPTED_ENCODING, payloadCodecFromEnv, PayloadCodecError } from '../../shared/infra/payload-codec';
import type { RunnerDagState } from '../../shared/runner-contracts';
import { roleTokens, signInCookie, startTestApi, type TestApi } from '../support/api';
import { awsEnvironment, provisionAws, startRunnerBed, type RunnerBed } from '../support/runner-bed';
import { historyText, stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

describe('payload encryption codec', () => {
  const key = randomBytes(32).toString('base64');
  const codec = payloadCodecFromEnv({ KUMOSS_PAYLOAD_KEY: key, KUMOSS_PAYLOAD_KEY_ID: 'test-1' });
  const UI = 'http://127.0.0.1:8233';
  let bed: RunnerBed;
  let h: TemporalHarness;
  let api: TestApi;
  let plain: Client;
  let token: string;

  beforeAll(async () => {
    bed = await startRunnerBed(stack().databaseUrl);
    h = await temporalHarness('codec', testActivities({ runners: bed.deps }), {
      dataConverter: { payloadCodecs: [codec!] },
    });
    plain = new Client({ connection: await Connection.connect({ address: stack().temporalAddress }) });
    token = (await roleTokens(bed.db, 'codec')).developer;
    api = await startTestApi(h, bed.db, undefined, undefined, undefined, { codec, uiOrigin: UI });
  });
  afterAll(async () => {
    api?.close();
    await plain?.connection.close();
    await h?.close();
    await bed?.close();
  });

  it('a run is readable through the codec, while the server holds ciphertext only', async () => {
    const org = await bed.organization();
    const conn = await bed.connection(org, 'aws');
    const env = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), env);
    const group = await bed.group(org, conn, env);
    const workflowId = randomUUID();
    const out = (await h.client.workflow.execute('runner.environment-drift-detect', {
      taskQueue: h.taskQueue,
      workflowId,
      args: [{ runner_group_uuid: group.runner_group_uuid, organization_uuid: org }],
    })) as RunnerDagState;
    expect(out.plan_status).toBe('clean');

    const history = await plain.workflow.getHandle(workflowId).fetchHistory();
    // Search attributes stay plain on purpose (the server indexes them); everything else is payloads.
    const events = (history.events ?? []).map((e) => ({
      ...e,
      upsertWorkflowSearchAttributesEventAttributes: undefined,
      workflowExecutionStartedEventAttributes: {
        ...e.workflowExecutionStartedEventAttributes,
        searchAttributes: undefined,
      },
    }));
    const raw = historyText(events);
    expect(raw).not.toContain(group.runner_group_uuid);
    expect(raw).not.toContain(env.ecs_cluster.name);
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    expect(new TextDecoder().decode(started?.metadata?.encoding ?? new Uint8Array())).toBe(
      ENCRYPTED_ENCODING,
    );

    // The Web UI's call: POST /codec/decode from its origin, base64 on the wire.
    const wire = {
      payloads: [
        {
          metadata: Object.fromEntries(
            Object.entries(started?.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
          ),
          data: Buffer.from(started?.data ?? new Uint8Array()).toString('base64'),
        },
      ],
    };
    // An Origin header alone proves nothing: the Web UI's origin without a signed-in user is refused.
    expect(
      (await api.call('POST', '/codec/decode', undefined, wire, { origin: UI, 'x-namespace': 'default' }))
        .status,
    ).toBe(401);
    // The Web UI's browser with the user's Kumoss session cookie ("include cross-origin credentials").
    const cookie = await signInCookie(api, token);
    const decoded = await api.call('POST', '/codec/decode', undefined, wire, {
      origin: UI,
      'x-namespace': 'default',
      cookie,
    });
    expect(decoded.status).toBe(200);
    expect(decoded.headers.get('access-control-allow-origin')).toBe(UI);
    expect(decoded.headers.get('access-control-allow-credentials')).toBe('true');
    const payload = (decoded.body.payloads as { data: string }[])[0];
    expect(Buffer.from(payload?.data ?? '', 'base64').toString('utf8')).toContain(group.runner_group_uuid);
    // A token: allowed; a made-up token or cookie: 401; neither: 401; garbage: 400.
    expect((await api.call('POST', '/codec/decode', token, wire)).status).toBe(200);
    expect((await api.call('POST', '/codec/decode', 'not-a-token', wire, { origin: UI })).status).toBe(401);
    expect(
      (
        await api.call('POST', '/codec/decode', undefined, wire, {
          origin: UI,
          cookie: 'kumoss_session=forged',
        })
      ).status,
    ).toBe(401);
    expect((await api.call('POST', '/codec/decode', undefined, wire)).status).toBe(401);
    const tampered = structuredClone(wire);
    tampered.payloads[0]!.data = Buffer.from('not a ciphertext at all, no').toString('base64');
    expect((await api.call('POST', '/codec/decode', token, tampered)).status).toBe(400);
    expect((await api.call('POST', '/codec/decode', token, { payloads: 'x' })).status).toBe(400);
    const preflight = await fetch(`${api.url}/codec/decode`, { method: 'OPTIONS', headers: { origin: UI } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-credentials')).toBe('true');
    // Another origin gets no CORS grant at all.
    const elsewhere = await fetch(`${api.url}/codec/decode`, {
      method: 'OPTIONS',
      headers: { origin: 'http://127.0.0.1:9999' },
    });
    expect(elsewhere.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses a key of the wrong size and decrypts with a rotated-out key still listed', async () => {
    expect(() =>
      payloadCodecFromEnv({ KUMOSS_PAYLOAD_KEY: Buffer.from('short').toString('base64') }),
    ).toThrow(PayloadCodecError);
    const old = randomBytes(32).toString('base64');
    const before = payloadCodecFromEnv({ KUMOSS_PAYLOAD_KEY: old, KUMOSS_PAYLOAD_KEY_ID: 'old' })!;
    const after = payloadCodecFromEnv({
      KUMOSS_PAYLOAD_KEY: key,
      KUMOSS_PAYLOAD_KEY_ID: 'new',
      KUMOSS_PAYLOAD_OLD_KEYS: `old:${old}`,
    })!;
    const [enc] = await before.encode([
      {
        metadata: { encoding: new TextEncoder().encode('json/plain') },
        data: new TextEncoder().encode('"x"'),
      },
    ]);
    const [dec] = await after.decode([enc!]);
    expect(new TextDecoder().decode(dec?.data ?? new Uint8Array())).toBe('"x"');
  });
});
