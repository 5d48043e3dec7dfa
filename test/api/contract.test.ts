// One API contract: every Express route is in the OpenAPI document and every documented path is a
// route; a declared operation's answer is checked against its response schema (every test API runs
// with checkResponses, so each API test also proves the answers it reads fit their schemas).
import { describe, expect, it } from 'vitest';
import { createApp, type AppDeps } from '../../api/app';
import { contractViolation, operationPaths, type Operation } from '../../api/contract';
import { API_OPERATIONS, openApiDocument } from '../../api/openapi';
import { sessionOperations } from '../../api/routes/sessions';

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** `METHOD path` of every route the app registers (Express 5's router stack). */
function routesOf(app: ReturnType<typeof createApp>): string[] {
  const out: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const l of stack) {
      if (l.route) for (const m of Object.keys(l.route.methods)) out.push(`${m} ${l.route.path}`);
      else if (l.handle?.stack) walk(l.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return out;
}

// Routers are built without touching their dependencies; no request is made here.
const inert = {} as never;
const app = createApp({
  checks: [],
  log: () => undefined,
  metrics: false,
  codec: { codec: undefined, uiOrigin: '' },
  sessions: {
    db: inert,
    client: inert,
    taskQueue: 'contract',
    targets: { allowed: [] },
    orchestration: { max_drift_reports: 3, drift_group_operations: 8 },
    artifacts: inert,
    presignTtlSeconds: 60,
    events: { pollMs: 100, maxPolls: 1 },
  },
} satisfies AppDeps);

const documented = Object.entries(openApiDocument().paths as Record<string, Record<string, unknown>>).flatMap(
  ([path, item]) => Object.keys(item).map((m) => `${m} ${path}`),
);

/** A route's path as a pattern a documented path matches: `:mode` stands for `{mode}` or a literal. */
const pattern = (route: string) =>
  new RegExp(
    `^${route.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/:(\w+)/g, '(\\{$1\\}|\\{\\w+\\}|[^/{}]+)')}$`,
  );

describe('the API contract', () => {
  it('documents every route the app serves, and documents nothing it does not serve', () => {
    const routes = routesOf(app).filter((r) => / \/(api|codec)\/|\/health$/.test(r));
    expect(routes.length).toBeGreaterThan(50);
    const undocumented = routes.filter((r) => !documented.some((d) => pattern(r).test(d)));
    expect(undocumented).toEqual([]);
    const unserved = documented.filter((d) => !routes.some((r) => pattern(r).test(d)));
    expect(unserved).toEqual([]);
  });

  it('serves each declared operation under its declared method and path', () => {
    const routes = routesOf(app);
    for (const op of API_OPERATIONS) expect(routes).toContain(`${op.method} ${op.path}`);
  });

  it('documents a declared operation from its schemas: parameters, query, body and response', () => {
    const paths = operationPaths(API_OPERATIONS) as Record<string, Record<string, Record<string, unknown>>>;
    const list = paths['/api/v1/sessions']!.get!;
    expect(list.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'limit', in: 'query', required: false }),
        expect.objectContaining({ name: 'before', in: 'query', required: false }),
      ]),
    );
    const ok = (
      list.responses as Record<string, { content?: Record<string, { schema: { properties?: object } }> }>
    )['200'];
    expect(Object.keys(ok?.content?.['application/json']?.schema.properties ?? {})).toEqual([
      'sessions',
      'next',
    ]);
    const revert = paths['/api/v1/sessions/{id}/revert']!.post!;
    expect(revert.parameters).toEqual([expect.objectContaining({ name: 'id', in: 'path', required: true })]);
    expect(revert.requestBody).toBeDefined();
    expect(Object.keys(revert.responses as object)).toEqual(['202', '400', '401', '403', '404']);
  });

  it('finds an answer that does not fit its schema, and a status the operation does not declare', () => {
    const list: Operation = sessionOperations.list;
    const row = {
      session_id: 's-1',
      repository_url: 'https://git.example/r.git',
      cloud: 'aws',
      scope_id: '1',
      iac_path: '',
      status: 'ACTIVE',
      in_flight: null,
      created_at: new Date('2026-12-03T10:00:00Z'), // a Date in the handler, a string on the wire
      last_outcome: null,
    };
    expect(contractViolation(list, 200, { sessions: [row], next: null })).toBeUndefined();
    expect(contractViolation(list, 200, { sessions: [{ ...row, status: 'RUNNING' }], next: null })).toMatch(
      /^GET \/api\/v1\/sessions 200: sessions\.0\.status /,
    );
    expect(contractViolation(list, 200, { sessions: [row] })).toMatch(/: next /);
    expect(contractViolation(list, 201, { sessions: [], next: null })).toBe(
      'GET /api/v1/sessions answered 201, which it does not declare',
    );
    // Errors have their own shape, checked by the error handler's tests.
    expect(contractViolation(list, 404, { error: { code: 'not_found', message: 'x' } })).toBeUndefined();
  });

  it('declares a body for every answer that has one, so the web client is typed from schemas', () => {
    const bodiless = API_OPERATIONS.flatMap((op) =>
      Object.entries(op.responses)
        .filter(([status, r]) => status !== '204' && !r.schema && !r.mediaType)
        .map(([status]) => `${op.method} ${op.path} ${status}`),
    );
    expect(bodiless).toEqual([]);
  });

  it('points every Location header at a resource the API serves with GET, and finds one left unset', () => {
    const gets = new Set(API_OPERATIONS.filter((op) => op.method === 'get').map((op) => op.path));
    const located = API_OPERATIONS.flatMap((op) =>
      Object.values(op.responses).flatMap((r) => (r.location ? [r.location] : [])),
    );
    expect(located.length).toBeGreaterThanOrEqual(12);
    expect(located.filter((l) => !gets.has(l))).toEqual([]);

    const create = API_OPERATIONS.find((op) => op.method === 'post' && op.path === '/api/v1/webhooks')!;
    const endpoint = {
      endpoint_uuid: '0b0e3c1a-6f43-4c52-9d5c-0d1f1c8c2b11',
      organization_uuid: '6a1b1e9e-1d0c-4b8e-8f5e-3e0e7d8a9c10',
      url: 'https://hooks.example/kumoss',
      events: ['drift.detected'],
      secret: 'whsec_x',
    };
    expect(contractViolation(create, 201, endpoint, { location: '/api/v1/webhooks/0b0e…' })).toBeUndefined();
    expect(contractViolation(create, 201, endpoint, {})).toBe(
      'POST /api/v1/webhooks 201: no Location header',
    );
    const paths = operationPaths([create]) as Record<string, Record<string, { responses: object }>>;
    expect(paths['/api/v1/webhooks']!.post!.responses).toMatchObject({
      201: { headers: { Location: { description: 'Where to read it: GET /api/v1/webhooks/{id}' } } },
    });
  });

  it('documents the event stream as text/event-stream with its Last-Event-ID header, and health without credentials', () => {
    const doc = openApiDocument().paths as Record<string, Record<string, Record<string, unknown>>>;
    const events = doc['/api/v1/events/subscribe/{id}']!.get!;
    expect(events.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'Last-Event-ID', in: 'header', required: false }),
      ]),
    );
    expect(Object.keys((events.responses as Record<string, { content: object }>)['200']!.content)).toEqual([
      'text/event-stream',
    ]);
    expect(doc['/health']!.get!.security).toEqual([]);
    expect(doc['/api/v1/sessions']!.get!.security).toBeUndefined();
  });
});
