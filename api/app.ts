// createApp(deps): the Express application without listen(), so tests mount it on their own socket.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { cacheTokens } from './auth';
import { errorHandler, notFound } from './errors';
import { createApiMetrics } from './metrics';
import { traceRequests } from './request-trace';
import { documentOperation, openApiDocument } from './openapi';
import { createAdminRouter } from './routes/admin';
import { createAuthSessionRouter } from './routes/auth-session';
import {
  DEFAULT_RATE_LIMITS,
  failedAuthLimit,
  ingestionLimit,
  signInLimit,
  type RateLimitConfig,
} from './rate-limits';
import { createAuthorizeRouter } from './routes/authorize';
import { createCodecRouter, type CodecRouteDeps } from './routes/codec';
import { createDriftRouter } from './routes/drift';
import { createEventsRouter } from './routes/events';
import { createWebhooksRouter } from './routes/webhooks';
import { createHealthRouter, type ComponentCheck } from './routes/health';
import { createMappingRouter } from './routes/mapping';
import { createPullRequestRouter } from './routes/pull-requests';
import { createRunnerGroupsRouter } from './routes/runner-groups';
import { createRunnerSchedulesRouter } from './routes/runner-schedules';
import { createStacksRouter } from './routes/stacks';
import { createAuditEventsRouter } from './routes/audit-events';
import { createSessionsRouter, type SessionDetailDeps } from './routes/sessions';
import { createWorkflowsRouter } from './routes/workflows';
import { checkResponses, route } from './contract';

export interface AppDeps {
  checks: ComponentCheck[];
  /**
   * Check each answer of a declared operation against its response schema (api/contract.ts); one
   * that does not fit becomes a 500 naming the field. Every test API turns it on.
   */
  checkResponses?: boolean;
  log: (err: unknown) => void;
  /** The session routes (drift, apply, detail); absent in a health-only app. */
  sessions?: SessionDetailDeps & {
    events: { pollMs: number; maxPolls: number };
  };
  /** services.authz; default disabled. */
  authz?: { enabled: boolean; url: string };
  /** services.mapping; default disabled. */
  mapping?: { enabled: boolean; url: string };
  /** The codec endpoint the Web UI decodes payloads through (absent codec: payloads pass through). */
  codec?: CodecRouteDeps;
  /** The Temporal Web UI the web application links runs to. */
  temporalUiUrl?: string;
  /** The built web application (web/dist), served at this origin; absent: API only. */
  webDist?: string;
  /** The object store's origin: the web application fetches artifacts from their presigned URLs. */
  artifactOrigin?: string;
  /** Every request logged here (pino-http), with its request id; absent: requests are not logged. */
  requestLog?: Logger;
  /** GET /metrics (Prometheus); default true. */
  metrics?: boolean;
  /** security.rate_limits (api/rate-limits.ts); default DEFAULT_RATE_LIMITS. */
  rateLimits?: RateLimitConfig;
}

/** A caller's own `x-request-id` when it is a plain token; else a new one. */
function requestId(header: string | undefined): string {
  return header && /^[\w.:-]{1,128}$/.test(header) ? header : randomUUID();
}

/**
 * The web application may load its own scripts and styles, and talk to this origin and to the
 * object store's (presigned artifact URLs) only.
 */
export function webCsp(artifactOrigin?: string): string {
  const connect = ["'self'", ...(artifactOrigin ? [new URL(artifactOrigin).origin] : [])].join(' ');
  return `default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src ${connect}; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'`;
}

function serveWeb(app: Express, dist: string, artifactOrigin?: string): void {
  const WEB_CSP = webCsp(artifactOrigin);
  const index = join(dist, 'index.html');
  app.use(
    express.static(dist, {
      index: false,
      setHeaders: (res) => res.setHeader('content-security-policy', WEB_CSP),
    }),
  );
  // Every other page of the application is the same document; the router reads the path.
  app.get(/^\/(?!api\/|health$|codec\/).*/, (_req, res) => {
    res.setHeader('content-security-policy', WEB_CSP);
    res.sendFile(index);
  });
}

export const TEMPORAL_CALL_DEADLINE_MS = 10_000;

export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  // Every response names its request (x-request-id), the id its log line and trace carry.
  app.use((req, res, next) => {
    const id = requestId(req.get('x-request-id'));
    (req as { id?: string }).id = id;
    res.setHeader('x-request-id', id);
    next();
  });
  app.use(traceRequests());
  const metrics = deps.metrics === false ? undefined : createApiMetrics(deps.sessions?.db);
  if (metrics) {
    app.use(metrics.middleware);
    app.get('/metrics', async (_req, res) => {
      res.setHeader('content-type', metrics.registry.contentType);
      res.send(await metrics.registry.metrics());
    });
  }
  if (deps.requestLog)
    app.use(
      pinoHttp({
        logger: deps.requestLog,
        genReqId: (req) => (req as { id?: string }).id ?? randomUUID(),
        // Method, path and status only: no header (tokens, cookies, signatures) reaches the log.
        serializers: {
          req: (req: { id: unknown; method: string; url: string }) => ({
            id: req.id,
            method: req.method,
            url: req.url,
          }),
          res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
        },
      }),
    );
  // Before anything reads a body or a credential: a client past its limit gets 429 and nothing runs.
  const limits = deps.rateLimits ?? DEFAULT_RATE_LIMITS;
  app.use(failedAuthLimit(limits));
  app.use('/api/v1/auth/session', signInLimit(limits));
  app.use('/api/v1/audit-events', ingestionLimit(limits));
  if (deps.codec) app.use(createCodecRouter(deps.codec, deps.sessions?.db));
  app.use(express.json({ limit: '1mb' }));
  if (deps.checkResponses) app.use(checkResponses());
  app.use(createHealthRouter(deps.checks));
  const openapi = openApiDocument();
  route(app, documentOperation, (_req, res) => {
    res.json(openapi);
  });
  if (deps.sessions?.hub) cacheTokens(deps.sessions.db, deps.sessions.hub);
  if (deps.sessions) {
    // Every route that starts work asks the authorization sidecar (api/authz.ts).
    const sessions = { ...deps.sessions, ...(deps.authz ? { authz: deps.authz } : {}) };
    // Every Temporal call a request makes must finish within TEMPORAL_CALL_DEADLINE_MS: with
    // Temporal unreachable the request gets its 503 then, not after the client's own long retries.
    // (Event subscriptions poll for hours and set their own per-call deadlines.)
    const client = sessions.client;
    app.use((req, _res, next) => {
      if (req.path.startsWith('/api/v1/events/')) return next();
      void client.withDeadline(Date.now() + TEMPORAL_CALL_DEADLINE_MS, () => {
        next();
        return Promise.resolve();
      });
    });
    app.use(
      createAuthSessionRouter({
        db: sessions.db,
        ...(deps.temporalUiUrl ? { temporalUiUrl: deps.temporalUiUrl } : {}),
      }),
    );
    app.use(createDriftRouter(sessions));
    app.use(createSessionsRouter(sessions));
    app.use(
      createEventsRouter({
        ...sessions,
        ...sessions.events,
        ...(metrics ? { streams: metrics.streams } : {}),
      }),
    );
    app.use(createAdminRouter(sessions));
    app.use(createWorkflowsRouter(sessions));
    app.use(createRunnerGroupsRouter(sessions));
    app.use(createStacksRouter(sessions));
    app.use(createAuditEventsRouter(sessions));
    app.use(createWebhooksRouter(sessions));
    app.use(createRunnerSchedulesRouter(sessions));
    app.use(createPullRequestRouter(sessions));
    app.use(createAuthorizeRouter({ db: sessions.db, authz: deps.authz ?? { enabled: false, url: '' } }));
    app.use(createMappingRouter({ db: sessions.db, mapping: deps.mapping ?? { enabled: false, url: '' } }));
  }
  if (deps.webDist && existsSync(join(deps.webDist, 'index.html')))
    serveWeb(app, deps.webDist, deps.artifactOrigin);
  app.use(notFound);
  app.use(errorHandler(deps.log));
  return app;
}
