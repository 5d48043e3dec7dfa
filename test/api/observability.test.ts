// Observability on the real stack: one API request yields one connected trace through the session
// and round workflows and their activities down to the engine calls (an in-memory exporter in
// place of the OTLP one); GET /metrics exposes the named series with their values; every
// response carries a request id, the request log line carries it and never a header.
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../scripts/embedded/ports';
import { createDb, migrate, type Db } from '../../shared/infra/db';
import { driftRoundWorkflowId } from '../../shared/ids';
import { driftRound } from '../../workflows';
import { startTracing, type Tracing } from '../../shared/infra/tracing';
import type { DriftTestBed } from '../support/drift-test-bed';
import { roleTokens, startTestApi, waitForSession, type TestApi } from '../support/api';
import { workerProcess } from '../support/processes';
import { newTestBed, roundInput, stack, temporalHarness, type TemporalHarness } from '../support/stack';

/** The value of one series (`name{labels}`) in a Prometheus text exposition; undefined if absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const got = new Map<string, string>();
    for (const m of (/\{(.*)\}/.exec(line)?.[1] ?? '').matchAll(/(\w+)="([^"]*)"/g))
      got.set(m[1] ?? '', m[2] ?? '');
    if (Object.entries(labels).every(([k, v]) => got.get(k) === v)) return Number(line.split(' ').pop());
  }
  return undefined;
}

describe('observability', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  let h: TemporalHarness;
  let db: Db;
  let api: TestApi;
  let bed: DriftTestBed;
  let tokens: Record<string, string>;
  const logLines: Record<string, unknown>[] = [];
  let sessionId = '';

  beforeAll(async () => {
    tracing = startTracing({ service: 'kumoss-test', spanProcessor: new SimpleSpanProcessor(exporter) })!;
    h = await temporalHarness('observability', undefined, { tracing });
    db = createDb(stack().databaseUrl);
    await migrate(db);
    tokens = await roleTokens(db, 'obs');
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n'))
          if (l.trim()) logLines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    api = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      requestLog: pino({ level: 'info' }, sink),
    });
    bed = await newTestBed();
  });
  afterAll(async () => {
    api?.close();
    await bed?.destroy();
    await db?.destroy();
    await h?.close();
    await tracing?.shutdown();
  });

  it('gives one request one connected trace: the route, the workflows, their activities, the engine calls', async () => {
    await bed.inject('ingress');
    const accepted = await api.call('POST', '/api/v1/drift/partial', tokens.devops, {
      repository_url: bed.repoUrl,
      cloud: 'aws',
      scope_id: '123456789012',
      text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
    });
    expect(accepted.status).toBe(202);
    sessionId = accepted.body.session_id as string;
    const detail = await waitForSession(api, tokens.developer ?? '', sessionId, 1);
    expect(detail.rounds[0]?.outcome).toBe('Succeeded');
    // A drift session stays open for follow-ups; apply (which a drift session refuses) ends it, so
    // its workflow's own span finishes too.
    expect((await api.call('POST', `/api/v1/sessions/${sessionId}/apply`, tokens.devops)).status).toBe(202);

    const request = exporter
      .getFinishedSpans()
      .find((s) => s.name === 'POST /api/v1/drift/partial' && s.kind === SpanKind.SERVER);
    expect(request, 'the request span').toBeDefined();
    const traceId = request!.spanContext().traceId;
    const byId = new Map<string, ReadableSpan>();
    // Workflow spans arrive through the worker's sink once their tasks complete.
    await vi.waitFor(
      () => {
        const names = exporter
          .getFinishedSpans()
          .filter((s) => s.spanContext().traceId === traceId)
          .map((s) => s.name);
        expect(names).toEqual(
          expect.arrayContaining([
            'UpdateWithStartWorkflow:operation',
            'RunWorkflow:session',
            'HandleUpdate:operation',
            'StartChildWorkflow:driftRound',
            'RunWorkflow:driftRound',
            'RunActivity:planIteration',
            'terraform plan',
          ]),
        );
      },
      { timeout: 30_000, interval: 200 },
    );
    const inTrace = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    for (const s of inTrace) byId.set(s.spanContext().spanId, s);
    // Every span of the trace leads up to the request's span: nothing hangs loose.
    for (const s of inTrace) {
      let at: ReadableSpan | undefined = s;
      const path: string[] = [];
      while (at && at !== request) {
        path.push(at.name);
        at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined;
      }
      expect(at, `${path.join(' ← ')} reaches the request`).toBe(request);
    }
    const plans = inTrace.filter((s) => s.name === 'terraform plan');
    // The first plan saw the drift (-detailed-exitcode: 2).
    expect(plans.map((p) => p.attributes['process.exit.code'])).toContain(2);
    const plan = plans[0]!;
    const ancestors: string[] = [];
    for (let at = byId.get(plan.parentSpanId ?? ''); at; at = byId.get(at.parentSpanId ?? ''))
      ancestors.push(at.name);
    expect(ancestors).toContain('RunActivity:planIteration');
    expect(ancestors).toContain('RunWorkflow:driftRound');
    expect(ancestors).toContain('StartChildWorkflow:driftRound');
    // Spans from other requests are not in this trace.
    expect(inTrace.filter((s) => s.kind === SpanKind.SERVER).map((s) => s.name)).toEqual([
      'POST /api/v1/drift/partial',
    ]);

    // The metadata store's rounds, by kind and outcome, as every API replica sees them.
    const text = await (await fetch(`${api.url}/metrics`)).text();
    expect(sample(text, 'kumoss_rounds', { kind: 'partial', outcome: 'Succeeded' })).toBeGreaterThanOrEqual(
      1,
    );
  });

  it('exposes requests by route pattern and status, their latencies and the open event streams on /metrics', async () => {
    const metrics = async () => {
      const r = await fetch(`${api.url}/metrics`);
      expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return r.text();
    };
    const labels = { method: 'GET', route: '/api/v1/sessions/:id', status: '404' };
    const before = sample(await metrics(), 'kumoss_http_requests_total', labels) ?? 0;
    for (const id of ['01JAAAAAAAAAAAAAAAAAAAAAAA', '01JBBBBBBBBBBBBBBBBBBBBBBB'])
      expect((await api.call('GET', `/api/v1/sessions/${id}`, tokens.developer)).status).toBe(404);
    let text = await metrics();
    // The pattern, not the raw path: ids do not become series.
    expect(sample(text, 'kumoss_http_requests_total', labels)).toBe(before + 2);
    expect(text).not.toContain('01JAAAAAAAAAAAAAAAAAAAAAAA');
    expect(sample(text, 'kumoss_http_request_duration_seconds_count', labels)).toBe(before + 2);
    expect(sample(text, 'kumoss_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(
      before + 2,
    );
    expect(sample(text, 'kumoss_api_process_resident_memory_bytes')).toBeGreaterThan(0);

    // An open event stream counts while it is open.
    expect(sample(text, 'kumoss_sse_open_streams')).toBe(0);
    const ac = new AbortController();
    const stream = await fetch(`${api.url}/api/v1/events/subscribe/${sessionId}`, {
      headers: { authorization: `Bearer ${tokens.developer}` },
      signal: ac.signal,
    });
    expect(stream.status).toBe(200);
    await vi.waitFor(async () => expect(sample(await metrics(), 'kumoss_sse_open_streams')).toBe(1));
    ac.abort();
    await vi.waitFor(async () => expect(sample(await metrics(), 'kumoss_sse_open_streams')).toBe(0));
    text = await metrics();
    expect(
      sample(text, 'kumoss_http_requests_total', { route: '/api/v1/events/subscribe/:id', status: '200' }),
    ).toBe(1);
  });

  it('names every response with a request id, logs it with the request and logs no header', async () => {
    const own = await api.call('GET', '/api/v1/sessions', tokens.developer, undefined, {
      'x-request-id': 'trace-me-42',
    });
    expect(own.headers.get('x-request-id')).toBe('trace-me-42');
    const made = await api.call('GET', '/api/v1/sessions', tokens.developer, undefined, {
      'x-request-id': 'not a token; <script>',
    });
    const id = made.headers.get('x-request-id') ?? '';
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await vi.waitFor(() => {
      const line = logLines.find((l) => (l.req as { id?: string } | undefined)?.id === 'trace-me-42');
      expect(line).toMatchObject({
        req: { method: 'GET', url: '/api/v1/sessions' },
        res: { statusCode: 200 },
      });
    });
    expect(logLines.some((l) => (l.req as { id?: string } | undefined)?.id === id)).toBe(true);
    expect(JSON.stringify(logLines)).not.toContain(tokens.developer);
  });

  it("serves the Temporal SDK's worker metrics on the worker's metrics address", async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const queue = `obs-metrics-${randomUUID().slice(0, 8)}`;
    const worker = await workerProcess(queue, { KUMOSS_WORKER_METRICS_ADDRESS: address });
    try {
      const input = roundInput(bed.repoUrl, {
        mode: 'partial',
        text: 'Resolve the drift on security group sg-web-demo.',
      });
      const result = await h.client.workflow.execute(driftRound, {
        taskQueue: queue,
        workflowId: driftRoundWorkflowId(input.session_id, input.round_id),
        args: [input],
      });
      expect(result.status).toBe('completed');
      await vi.waitFor(
        async () => {
          const text = await (await fetch(`http://${address}/metrics`)).text();
          expect(sample(text, 'temporal_workflow_completed', { task_queue: queue })).toBe(1);
          expect(
            sample(text, 'temporal_activity_execution_latency_count', {
              task_queue: queue,
              activity_type: 'planIteration',
            }),
          ).toBeGreaterThanOrEqual(1);
          expect(sample(text, 'temporal_worker_task_slots_available', { task_queue: queue })).toBeGreaterThan(
            0,
          );
        },
        { timeout: 15_000, interval: 250 },
      );
    } finally {
      worker.kill('SIGTERM');
    }
  });
});
