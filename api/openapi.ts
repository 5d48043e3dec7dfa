// The OpenAPI document, assembled from the operations each route module declares beside its
// handlers (api/contract.ts): the same zod schemas the routes validate requests with and the
// answers are checked against.
import { z } from 'zod';
import { operation, operationPaths, type Operation } from './contract';
import { errorBodySchema } from './errors';
import { adminOperations } from './routes/admin';
import { authOperations } from './routes/auth-session';
import { authorizeOperations } from './routes/authorize';
import { codecOperations } from './routes/codec';
import { driftOperations } from './routes/drift';
import { eventOperations } from './routes/events';
import { healthOperations } from './routes/health';
import { mappingOperations } from './routes/mapping';
import { pullRequestOperations } from './routes/pull-requests';
import { runnerGroupOperations } from './routes/runner-groups';
import { runnerScheduleOperations } from './routes/runner-schedules';
import { sessionOperations } from './routes/sessions';
import { stackOperations } from './routes/stacks';
import { auditOperations } from './routes/audit-events';
import { webhookOperations } from './routes/webhooks';
import { workflowOperations } from './routes/workflows';
import { SESSION_COOKIE } from './auth';

export const documentOperation = operation({
  method: 'get',
  path: '/api/v1/openapi.json',
  summary: 'This document',
  public: true,
  responses: { 200: { description: 'OpenAPI 3.0', schema: z.record(z.string(), z.unknown()) } },
  errors: [],
});

/** Every operation the API serves, each declared beside its handler. */
export const API_OPERATIONS: Operation[] = [
  documentOperation,
  ...[
    healthOperations,
    authOperations,
    authorizeOperations,
    mappingOperations,
    driftOperations,
    sessionOperations,
    eventOperations,
    pullRequestOperations,
    stackOperations,
    auditOperations,
    webhookOperations,
    runnerGroupOperations,
    runnerScheduleOperations,
    workflowOperations,
    adminOperations,
    codecOperations,
  ].flatMap((ops) => Object.values(ops)),
];

export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.0.3',
    info: { title: 'Kumoss API', version: '1' },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer' },
        cookie: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE },
      },
      schemas: {
        Error: z.toJSONSchema(errorBodySchema, { target: 'openapi-3.0', io: 'output' }),
      },
    },
    security: [{ bearer: [] }, { cookie: [] }],
    paths: operationPaths(API_OPERATIONS),
  };
}
