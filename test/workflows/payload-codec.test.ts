// Encrypted payloads: with KUMOSS_PAYLOAD_KEY the worker and client encrypt every payload (AES-256-
// GCM) with a key of the workflow's organization, so the Temporal server's history holds ciphertext
// only; the API's codec endpoint (what the Web UI calls) decrypts an admin's own organization's.
import { randomBytes, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Payload } from '@temporalio/common';
import { createUserInOrganization } from '../../shared/infra/db/users';
import { workflowOrganizations } from '../../shared/infra/db/workflow-organizations';
import {
  ENCRYPTED_ENCODING,
  ORGANIZATION_HEADER,
  payloadCodecFromEnv,
  PayloadCodecError,
  withOrganization,
} from '../../shared/infra/payload-codec';
import type { RunnerDagState } from '../../shared/runner-contracts';
import { signInCookie, startTestApi, waitForWorkflow, type TestApi } from '../support/api';
import { awsEnvironment, provisionAws, startRunnerBed, type RunnerBed } from '../support/runner-bed';
import { historyText, stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';

describe('payload encryption codec', () => {
  const key = randomBytes(32).toString('base64');
  const env = { KUMOSS_PAYLOAD_KEY: key, KUMOSS_PAYLOAD_KEY_ID: 'test-1' };
  const UI = 'http://127.0.0.1:8233';
  let bed: RunnerBed;
  let h: TemporalHarness;
  let api: TestApi;
  let apiClient: Client;
  let plain: Client;

  beforeAll(async () => {
    bed = await startRunnerBed(stack().databaseUrl);
    // The worker and the API hold codecs of their own, as two processes do: what one learns of a
    // workflow's organization the other does not share.
    const workerCodec = payloadCodecFromEnv(env, workflowOrganizations(bed.db));
    const apiCodec = payloadCodecFromEnv(env, workflowOrganizations(bed.db));
    h = await temporalHarness('codec', testActivities({ runners: bed.deps }), {
      dataConverter: { payloadCodecs: [workerCodec!] },
    });
    const connection = await Connection.connect({ address: stack().temporalAddress });
    plain = new Client({ connection });
    apiClient = new Client({ connection, dataConverter: { payloadCodecs: [apiCodec!] } });
    api = await startTestApi(
      { client: apiClient, taskQueue: h.taskQueue },
      bed.db,
      undefined,
      undefined,
      undefined,
      { codec: apiCodec, uiOrigin: UI },
      undefined,
      { temporalUiUrl: UI },
    );
  });
  afterAll(async () => {
    api?.close();
    await plain?.connection.close();
    await h?.close();
    await bed?.close();
  });

  /** An organization with a runner group, its admin and developer, and a detection run started through the API. */
  const organizationRun = async () => {
    const org = await bed.organization();
    const conn = await bed.connection(org, 'aws');
    const environment = awsEnvironment();
    await provisionAws(bed.awsClients(conn.region), environment);
    const group = await bed.group(org, conn, environment);
    const user = async (role: 'admin' | 'developer') =>
      (await createUserInOrganization(bed.db, { name: `${role}-${org}`, role, organization_uuid: org }))
        .token;
    const admin = await user('admin');
    const developer = await user('developer');
    const started = await api.call('POST', '/api/workflows/start', developer, {
      workflow_type: 'runner.environment-drift-detect',
      initial_data: { runner_group_uuid: group.runner_group_uuid },
    });
    expect(started.status).toBe(202);
    const workflowId = String(started.body.workflow_uuid);
    const done = await waitForWorkflow(api, developer, workflowId);
    expect(done.status).toBe('COMPLETED');
    expect((done.output as RunnerDagState).plan_status).toBe('clean');
    const history = await plain.workflow.getHandle(workflowId).fetchHistory();
    return { org, group, environment, admin, developer, history };
  };
  const header = (p: Payload | undefined, name: string) =>
    new TextDecoder().decode(p?.metadata?.[name] ?? new Uint8Array());
  const toWire = (p: Payload | undefined) => ({
    metadata: Object.fromEntries(
      Object.entries(p?.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
    data: Buffer.from(p?.data ?? new Uint8Array()).toString('base64'),
  });

  it("each organization's runs are encrypted with its own key, the server holds ciphertext only, and the codec endpoint decodes an admin's own organization's alone", async () => {
    const a = await organizationRun();
    const b = await organizationRun();

    // Search attributes stay plain on purpose (the server indexes them); everything else is payloads.
    const events = (a.history.events ?? []).map((e) => ({
      ...e,
      upsertWorkflowSearchAttributesEventAttributes: undefined,
      workflowExecutionStartedEventAttributes: {
        ...e.workflowExecutionStartedEventAttributes,
        searchAttributes: undefined,
      },
    }));
    const raw = historyText(events);
    expect(raw).not.toContain(a.group.runner_group_uuid);
    expect(raw).not.toContain(a.environment.ecs_cluster.name);
    const startedOf = (h: typeof a.history) =>
      h.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0] ?? undefined;
    const aStarted = startedOf(a.history);
    const bStarted = startedOf(b.history);
    expect(header(aStarted, 'encoding')).toBe(ENCRYPTED_ENCODING);
    // The API encrypted each start for its caller's organization ...
    expect(header(aStarted, ORGANIZATION_HEADER)).toBe(a.org);
    expect(header(bStarted, ORGANIZATION_HEADER)).toBe(b.org);
    // ... and the worker, which learnt each run's organization from its payloads, encrypted every
    // activity's input and result for that organization too.
    const activityPayloads = (a.history.events ?? []).flatMap((e) => [
      ...(e.activityTaskScheduledEventAttributes?.input?.payloads ?? []),
      ...(e.activityTaskCompletedEventAttributes?.result?.payloads ?? []),
    ]);
    expect(activityPayloads.length).toBeGreaterThan(2);
    expect(new Set(activityPayloads.map((p) => header(p, ORGANIZATION_HEADER)))).toEqual(new Set([a.org]));

    // The Web UI's call: POST /codec/decode from its origin with the admin's session cookie
    // ("include cross-origin credentials"), A's payload and B's in one request.
    const wire = { payloads: [toWire(aStarted), toWire(bStarted)] };
    // An Origin header alone proves nothing: the Web UI's origin without a signed-in user is refused.
    expect(
      (await api.call('POST', '/codec/decode', undefined, wire, { origin: UI, 'x-namespace': 'default' }))
        .status,
    ).toBe(401);
    const cookie = await signInCookie(api, a.admin);
    const decoded = await api.call('POST', '/codec/decode', undefined, wire, {
      origin: UI,
      'x-namespace': 'default',
      cookie,
    });
    expect(decoded.status).toBe(200);
    expect(decoded.headers.get('access-control-allow-origin')).toBe(UI);
    expect(decoded.headers.get('access-control-allow-credentials')).toBe('true');
    const [mine, theirs] = decoded.body.payloads as { metadata: Record<string, string>; data: string }[];
    expect(Buffer.from(mine?.data ?? '', 'base64').toString('utf8')).toContain(a.group.runner_group_uuid);
    // B's payload comes back exactly as it went: ciphertext.
    expect(theirs).toEqual(wire.payloads[1]);
    expect(Buffer.from(theirs?.data ?? '', 'base64').toString('utf8')).not.toContain(
      b.group.runner_group_uuid,
    );
    // B's admin reads B's and not A's.
    const fromB = await api.call('POST', '/codec/decode', b.admin, wire);
    expect(fromB.status).toBe(200);
    const [aSeenByB, bSeenByB] = fromB.body.payloads as { data: string }[];
    expect(aSeenByB).toEqual(wire.payloads[0]);
    expect(Buffer.from(bSeenByB?.data ?? '', 'base64').toString('utf8')).toContain(b.group.runner_group_uuid);
    // B's payload relabelled as A's does not authenticate under A's key.
    const relabelled = {
      payloads: [
        {
          ...wire.payloads[1]!,
          metadata: {
            ...wire.payloads[1]!.metadata,
            [ORGANIZATION_HEADER]: Buffer.from(a.org).toString('base64'),
          },
        },
      ],
    };
    const forged = await api.call('POST', '/codec/decode', a.admin, relabelled);
    expect(forged.status).toBe(400);
    expect((forged.body.error as { message: string }).message).toMatch(/does not authenticate/);
    // A developer of A's organization does not read payloads, nor is shown the Web UI link; the admin is.
    expect((await api.call('POST', '/codec/decode', a.developer, wire)).status).toBe(403);
    expect((await api.call('GET', '/api/v1/auth/me', a.developer)).body.temporal_ui_url).toBe('');
    expect((await api.call('GET', '/api/v1/auth/me', a.admin)).body.temporal_ui_url).toBe(UI);
    // Encoding (the Temporal CLI's --codec-endpoint) encrypts for the caller's organization.
    const plainPayload = {
      metadata: { encoding: Buffer.from('json/plain').toString('base64') },
      data: Buffer.from('"x"').toString('base64'),
    };
    const encoded = await api.call('POST', '/codec/encode', a.developer, { payloads: [plainPayload] });
    expect(encoded.status).toBe(200);
    const enc = (encoded.body.payloads as { metadata: Record<string, string> }[])[0];
    expect(Buffer.from(enc?.metadata[ORGANIZATION_HEADER] ?? '', 'base64').toString()).toBe(a.org);

    // A made-up token or cookie: 401; neither: 401; garbage: 400.
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
    expect((await api.call('POST', '/codec/decode', a.admin, tampered)).status).toBe(400);
    expect((await api.call('POST', '/codec/decode', a.admin, { payloads: 'x' })).status).toBe(400);
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

  it("places a payload by its workflow: the id's owner, what the workflow's payloads showed, the caller's scope, else the system's", async () => {
    const owner = randomUUID();
    const other = randomUUID();
    const lookups: string[] = [];
    const codec = payloadCodecFromEnv(env, (id) => {
      lookups.push(id);
      return Promise.resolve(id === 'owned' ? owner : undefined);
    })!;
    const one = [
      {
        metadata: { encoding: new TextEncoder().encode('json/plain') },
        data: new TextEncoder().encode('"v"'),
      },
    ];
    const org = async (p: Promise<Payload[]>) => header((await p)[0], ORGANIZATION_HEADER);
    // The lookup names the owner; the caller's scope does not override it.
    expect(
      await withOrganization(other, () =>
        org(codec.encode(one, { type: 'workflow', namespace: 'n', workflowId: 'owned' })),
      ),
    ).toBe(owner);
    // Not known to the lookup: the caller's scope; no scope: the system ('').
    expect(
      await withOrganization(other, () =>
        org(codec.encode(one, { type: 'workflow', namespace: 'n', workflowId: 'fresh' })),
      ),
    ).toBe(other);
    expect(await org(codec.encode(one, { type: 'workflow', namespace: 'n', workflowId: 'nobody' }))).toBe('');
    // Decoding a workflow's payload teaches a second codec (another process) whose it is.
    const worker = payloadCodecFromEnv(env)!;
    const [forFresh] = await codec.encodeFor(one, other);
    await worker.decode([forFresh!], { type: 'workflow', namespace: 'n', workflowId: 'fresh' });
    expect(
      await org(
        worker.encode(one, { type: 'activity', namespace: 'n', workflowId: 'fresh', isLocal: false }),
      ),
    ).toBe(other);
    // The system's payloads are decoded by the codec itself, never for an organization.
    const [system] = await codec.encodeFor(one, '');
    expect(header((await codec.decode([system!]))[0], 'encoding')).toBe('json/plain');
    expect((await codec.decodeFor([system!], owner))[0]).toBe(system);
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
