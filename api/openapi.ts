// The OpenAPI document, generated from the same zod schemas the routes validate with.
import { z } from 'zod';
import { operationPaths, type Operation } from './contract';
import { authOperations } from './routes/auth-session';
import { sessionOperations } from './routes/sessions';
import { stackOperations } from './routes/stacks';
import { adminOperations } from './routes/admin';
import { driftOperations } from './routes/drift';
import { pullRequestOperations } from './routes/pull-requests';
import { driftReportSchema } from '../shared/drift-report';
import { firstRequestSchema, followUpRequestSchema, revertBodySchema } from '../shared/contracts';
import {
  cloudConnectionSchema,
  detectInputSchema,
  repairInputSchema,
  runnerGroupSchema,
  runnerScheduleSchema,
  RUNNER_WORKFLOW_TYPES,
} from '../shared/runner-contracts';
import { authorizeRequestSchema } from './routes/authorize';
import { webhookSpecSchema } from '../shared/infra/webhooks';
import { scheduleNoteSchema } from '../shared/stack-contracts';

const schema = (s: z.ZodType) =>
  z.toJSONSchema(s, { target: 'openapi-3.0', unrepresentable: 'any', io: 'input' });

const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, field: { type: 'string' } },
    },
  },
};

const errors = (...codes: number[]) =>
  Object.fromEntries(
    codes.map((c) => [
      String(c),
      {
        description: 'Error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    ]),
  );

/** The operations declared beside their handlers; the rest of the document is written below. */
export const API_OPERATIONS: Operation[] = [
  ...Object.values(authOperations),
  ...Object.values(sessionOperations),
  ...Object.values(stackOperations),
  ...Object.values(adminOperations),
  ...Object.values(driftOperations),
  ...Object.values(pullRequestOperations),
];

export function openApiDocument(): Record<string, unknown> {
  const sessionId = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
  const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
  return {
    openapi: '3.0.3',
    info: { title: 'Kumoss API', version: '1' },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        FirstRequest: schema(firstRequestSchema),
        FollowUpRequest: schema(followUpRequestSchema),
        RevertAddresses: schema(revertBodySchema),
        RunnerSchedule: schema(runnerScheduleSchema),
        ScheduleNote: schema(scheduleNoteSchema),
        Webhook: schema(webhookSpecSchema),
        AuthorizeRequest: schema(authorizeRequestSchema),
        DriftReport: schema(driftReportSchema),
        CloudConnection: schema(cloudConnectionSchema),
        RunnerGroup: schema(runnerGroupSchema),
        // organization_uuid comes from the caller's credentials; naming another one is refused.
        DetectInput: schema(detectInputSchema.partial({ organization_uuid: true })),
        RepairInput: schema(repairInputSchema.partial({ organization_uuid: true })),
        WorkflowStart: {
          type: 'object',
          required: ['workflow_type'],
          properties: {
            workflow_type: { type: 'string', enum: [...RUNNER_WORKFLOW_TYPES] },
            initial_data: {
              description:
                'The workflow input; organization_uuid is set from the caller (naming another organization is a 403).',
              oneOf: [
                { $ref: '#/components/schemas/DetectInput' },
                { $ref: '#/components/schemas/RepairInput' },
              ],
            },
          },
        },
        Error: errorSchema,
      },
    },
    security: [{ bearer: [] }],
    paths: {
      // Declared beside their handlers (api/contract.ts).
      ...operationPaths(API_OPERATIONS),
      '/api/v1/events/subscribe/{id}': {
        get: {
          summary: 'Server-sent events of a session (developer); resume with Last-Event-ID',
          parameters: [
            sessionId,
            { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'text/event-stream' }, ...errors(401, 403, 404) },
        },
      },
      '/api/v1/auth/authorize': {
        post: {
          summary: 'Authorization preflight (developer)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/AuthorizeRequest' } } },
          },
          responses: { '200': { description: 'Authorized' }, ...errors(400, 401, 403, 503) },
        },
      },
      '/api/v1/mapping': {
        post: {
          summary: 'Mapping sidecar: provider and scope of a known repository, null when unsure (developer)',
          responses: { '200': { description: 'Mapping' }, ...errors(400, 401, 503) },
        },
      },
      '/api/workflows/start': {
        post: {
          summary:
            'Start runner.environment-drift-detect (developer; devops with auto_apply) or runner.environment-drift-repair (devops)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/WorkflowStart' } } },
          },
          responses: {
            '202': {
              description: 'Started: workflow_uuid, workflow_run_uuid',
              headers: { Location: { schema: { type: 'string' } } },
            },
            ...errors(400, 401, 403, 404, 409, 503),
          },
        },
      },
      '/api/workflows/{workflow_uuid}': {
        get: {
          summary:
            'Status and output (every field of the seed output schema) of a run, by workflow id or run id',
          parameters: [{ name: 'workflow_uuid', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'Status and output' }, ...errors(401, 404, 503) },
        },
      },
      '/api/workflows/{workflow_uuid}/retry': {
        post: {
          summary: 'Start a failed run again (retry_count + 1, retried_from)',
          parameters: [{ name: 'workflow_uuid', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '202': { description: 'Started' }, ...errors(401, 403, 404, 409, 503) },
        },
      },
      '/api/v1/cloud-connections': {
        post: {
          summary: 'Register a cloud connection (devops); credentials stay in the worker environment',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/CloudConnection' } } },
          },
          responses: { '201': { description: 'Created' }, ...errors(400, 401, 403, 409) },
        },
        get: {
          summary: 'Cloud connections of the organization',
          responses: { '200': { description: 'List' }, ...errors(401) },
        },
      },
      '/api/v1/runner-groups': {
        post: {
          summary: 'Register a runner group and the environment it should have (devops)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/RunnerGroup' } } },
          },
          responses: { '201': { description: 'Created' }, ...errors(400, 401, 403, 404, 409) },
        },
        get: {
          summary: 'Runner groups of the organization',
          responses: { '200': { description: 'List' }, ...errors(401) },
        },
      },
      '/api/v1/runner-groups/{id}': {
        get: {
          summary: 'A runner group',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'Runner group' }, ...errors(401, 404) },
        },
        put: {
          summary: 'Replace a runner group’s expected environment (devops)',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/RunnerGroup' } } },
          },
          responses: { '200': { description: 'Updated' }, ...errors(400, 401, 403, 404) },
        },
      },
      '/api/v1/runner-groups/{id}/executions': {
        get: {
          summary: 'Runner executions of a group (DAG runs), newest first',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'Executions' }, ...errors(401, 404) },
        },
      },
      '/api/v1/runner-plans/{plan_uuid}': {
        get: {
          summary: 'A RunnerEnvironmentDriftPlan',
          parameters: [{ name: 'plan_uuid', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'Plan' }, ...errors(401, 404) },
        },
      },
      '/api/v1/runner-groups/{id}/schedule': {
        put: {
          summary:
            'Set a runner group’s periodic detection (its Temporal Schedule runner-schedule:<group>); auto_apply off by default (devops)',
          parameters: [idParam],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/RunnerSchedule' } } },
          },
          responses: {
            '200': { description: 'The schedule and its state' },
            ...errors(400, 401, 403, 404, 503),
          },
        },
        get: {
          summary: 'A runner group’s schedule, whether it applies, and its state (next runs, paused, note)',
          parameters: [idParam],
          responses: { '200': { description: 'Schedule' }, ...errors(401, 404) },
        },
        delete: {
          summary: 'Remove a runner group’s schedule (devops)',
          parameters: [idParam],
          responses: { '204': { description: 'Removed' }, ...errors(401, 403, 404, 503) },
        },
      },
      ...Object.fromEntries(
        (['pause', 'resume', 'trigger'] as const).map((verb) => [
          `/api/v1/runner-groups/{id}/schedule/${verb}`,
          {
            post: {
              summary:
                verb === 'trigger'
                  ? 'Run the group’s scheduled detection now (devops)'
                  : `${verb === 'pause' ? 'Pause' : 'Resume'} the group’s schedule, with an optional note (devops)`,
              parameters: [idParam],
              ...(verb === 'trigger'
                ? {}
                : {
                    requestBody: {
                      content: {
                        'application/json': { schema: { $ref: '#/components/schemas/ScheduleNote' } },
                      },
                    },
                  }),
              responses: {
                [verb === 'trigger' ? '202' : '200']: { description: 'The schedule' },
                ...errors(400, 401, 403, 404, 503),
              },
            },
          },
        ]),
      ),
      '/api/v1/webhooks': {
        post: {
          summary:
            'Subscribe an endpoint to drift.detected, drift.resolved, detection.failed, detection.clean; answers the signing secret once (devops)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Webhook' } } },
          },
          responses: { '201': { description: 'Created, with its secret' }, ...errors(400, 401, 403) },
        },
        get: {
          summary: 'Webhook endpoints of the organization (never their secrets)',
          responses: { '200': { description: 'List' }, ...errors(401) },
        },
      },
      '/api/v1/webhooks/{id}': {
        delete: {
          summary: 'Remove an endpoint (devops)',
          parameters: [idParam],
          responses: { '204': { description: 'Deleted' }, ...errors(401, 403, 404) },
        },
      },
      '/api/v1/webhooks/{id}/deliveries': {
        get: {
          summary: 'Delivery log of an endpoint: attempts, last status code, error, when delivered',
          parameters: [idParam],
          responses: { '200': { description: 'Deliveries' }, ...errors(401, 404) },
        },
      },
      '/health': {
        get: {
          summary: 'Component health',
          security: [],
          responses: { '200': { description: 'All up' }, '503': { description: 'A component is down' } },
        },
      },
      '/api/v1/openapi.json': {
        get: { summary: 'This document', security: [], responses: { '200': { description: 'OpenAPI 3.0' } } },
      },
    },
  };
}
