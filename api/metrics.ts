// The API's Prometheus metrics on GET /metrics (prom-client): requests by route and status and
// their latencies, open event streams, rounds by kind and outcome (read from the metadata store
// at scrape time, so every API replica reports the same totals), and the process's own series.
// Each app has its own registry: several apps in one process (the tests) do not collide.
import type { NextFunction, Request, Response } from 'express';
import { sql } from 'kysely';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Db } from '../shared/infra/db';

export interface ApiMetrics {
  registry: Registry;
  /** Counts and times every request (mount before the routers). */
  middleware: (req: Request, res: Response, next: NextFunction) => void;
  /** The events router's hooks: the open-streams gauge. */
  streams: { opened(): void; closed(): void };
}

/** The route a request matched, as its pattern (`/api/v1/sessions/:id`), never its raw path. */
export function matchedRoute(req: { baseUrl: string; route?: unknown }): string | undefined {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? `${req.baseUrl}${path}` : undefined;
}

export function createApiMetrics(db?: Db): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'kumoss_api_' });
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'kumoss_http_requests_total',
    help: 'HTTP requests answered, by method, matched route and status code',
    labelNames,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'kumoss_http_request_duration_seconds',
    help: 'Time from a request to the end of its response, by method, matched route and status',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const open = new Gauge({
    name: 'kumoss_sse_open_streams',
    help: 'Session event streams open on this API process',
    registers: [registry],
  });
  if (db) {
    new Gauge({
      name: 'kumoss_rounds',
      help: 'Rounds recorded in the metadata store, by kind, status and outcome (empty: not ended)',
      labelNames: ['kind', 'status', 'outcome'] as const,
      registers: [registry],
      async collect() {
        const rows = await db
          .selectFrom('session_rounds')
          .select(['kind', 'status', 'outcome', sql<string>`count(*)`.as('n')])
          .groupBy(['kind', 'status', 'outcome'])
          .execute();
        this.reset();
        for (const r of rows)
          this.set({ kind: r.kind, status: r.status, outcome: r.outcome ?? '' }, Number(r.n));
      },
    });
  }
  return {
    registry,
    middleware: (req, res, next) => {
      const end = latency.startTimer();
      // 'close': an event stream the client drops never finishes, and still counts.
      res.once('close', () => {
        const labels = {
          method: req.method,
          route: matchedRoute(req) ?? 'unmatched',
          status: String(res.statusCode),
        };
        requests.inc(labels);
        // An event stream's time is its lifetime: not timed, so the histogram stays about requests.
        if (!res.getHeader('content-type')?.toString().startsWith('text/event-stream')) end(labels);
      });
      next();
    },
    streams: { opened: () => open.inc(), closed: () => open.dec() },
  };
}
