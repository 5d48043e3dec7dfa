// One API contract per route: an operation declares its method, path, summary, parameters, body and
// responses (zod schemas from shared/) beside its handler, and is registered from that declaration;
// the OpenAPI document is assembled from the operations (api/openapi.ts), the web client is typed
// from the document (web/src/api/schema.d.ts), and with `checkResponses` (every test API) each 2xx
// answer is checked against its declared schema — one that does not fit is a 500 naming the field.
import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';
import { z } from 'zod';

export interface ResponseContract {
  description: string;
  /** The body; absent for an answer without one (204). */
  schema?: z.ZodType;
  /** The body's media type when it is not JSON (`text/event-stream`); such a body is not checked. */
  mediaType?: string;
  /** The declared GET path its Location header names: where the answer's resource is read (checked: always set). */
  location?: string;
}

export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express form: `/api/v1/sessions/:id`. */
  path: string;
  summary: string;
  /** Path parameters, by name. */
  params?: Record<string, z.ZodType>;
  query?: z.ZodObject;
  /** Request headers it reads, by name. */
  headers?: Record<string, z.ZodType>;
  body?: z.ZodType;
  /** The answers it gives with their own body (every 2xx, and any other status whose body is not an error). */
  responses: Record<number, ResponseContract>;
  /** The error statuses it answers, each with the `{error: {code, message}}` body. */
  errors: number[];
  /** Callable without credentials (health, this document); otherwise a bearer token or the session cookie. */
  public?: true;
}

/** The `:id` of the session routes. */
export const sessionIdParam = { id: z.string().describe('The session id (`s-…`).') };

/** Declares an operation (identity: a typed literal). */
export function operation(op: Operation): Operation {
  return op;
}

/** Registers `handlers` on `router` under the operation's method and path. */
export function route(router: Router, op: Operation, ...handlers: RequestHandler[]): void {
  const tag: RequestHandler = (_req, res, next) => {
    res.locals.operation = op;
    next();
  };
  router[op.method](op.path, tag, ...handlers);
}

/** Where an answer does not fit its operation's contract, or undefined when it does. */
export function contractViolation(
  op: Operation,
  status: number,
  body: unknown,
  headers: Record<string, unknown> = {},
): string | undefined {
  const declared = op.responses[status];
  if (!declared) {
    if (status >= 300) return undefined;
    return `${op.method.toUpperCase()} ${op.path} answered ${status}, which it does not declare`;
  }
  if (declared.location && headers.location === undefined)
    return `${op.method.toUpperCase()} ${op.path} ${status}: no Location header`;
  if (!declared.schema || declared.mediaType) return undefined;
  // As the client receives it: dates as ISO strings, undefined fields gone.
  const wire: unknown = body === undefined ? undefined : JSON.parse(JSON.stringify(body));
  const parsed = declared.schema.safeParse(wire);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0];
  return `${op.method.toUpperCase()} ${op.path} ${status}: ${issue ? `${issue.path.join('.') || 'body'} ${issue.message}` : 'does not fit its schema'}`;
}

/** Checks every JSON answer of a declared operation against its contract (tests turn it on). */
export function checkResponses(): RequestHandler {
  return (_req: Request, res: Response, next: NextFunction) => {
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      const op = res.locals.operation as Operation | undefined;
      const violation = op ? contractViolation(op, res.statusCode, body, res.getHeaders()) : undefined;
      if (violation) {
        res.status(500);
        return json({ error: { code: 'response_contract', message: violation } });
      }
      return json(body);
    };
    next();
  };
}

const toJson = (s: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(s, { target: 'openapi-3.0', unrepresentable: 'any', io }) as Record<string, unknown>;

const errorResponses = (codes: number[]) =>
  Object.fromEntries(
    codes.map((c) => [
      String(c),
      {
        description: 'Error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    ]),
  );

/** The OpenAPI path items of `ops` (`:id` → `{id}`). */
export function operationPaths(ops: Operation[]): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of ops) {
    const path = op.path.replace(/:(\w+)/g, '{$1}');
    const parameters = [
      ...Object.entries(op.headers ?? {}).map(([name, s]) => ({
        name,
        in: 'header',
        required: !s.safeParse(undefined).success,
        schema: toJson(s, 'input'),
      })),
      ...Object.entries(op.params ?? {}).map(([name, s]) => ({
        name,
        in: 'path',
        required: true,
        schema: toJson(s, 'input'),
      })),
      ...Object.entries(op.query?.shape ?? {}).map(([name, s]) => ({
        name,
        in: 'query',
        required: !(s as z.ZodType).safeParse(undefined).success,
        schema: toJson(s as z.ZodType, 'input'),
      })),
    ];
    paths[path] = {
      ...paths[path],
      [op.method]: {
        summary: op.summary,
        ...(op.public ? { security: [] } : {}),
        ...(parameters.length ? { parameters } : {}),
        ...(op.body
          ? {
              requestBody: {
                required: true,
                content: { 'application/json': { schema: toJson(op.body, 'input') } },
              },
            }
          : {}),
        responses: {
          ...Object.fromEntries(
            Object.entries(op.responses).map(([status, r]) => [
              status,
              {
                description: r.description,
                ...(r.location
                  ? {
                      headers: {
                        Location: {
                          description: `Where to read it: GET ${r.location.replace(/:(\w+)/g, '{$1}')}`,
                          schema: { type: 'string' },
                        },
                      },
                    }
                  : {}),
                ...(r.schema
                  ? {
                      content: {
                        [r.mediaType ?? 'application/json']: { schema: toJson(r.schema, 'output') },
                      },
                    }
                  : r.mediaType
                    ? { content: { [r.mediaType]: { schema: { type: 'string' } } } }
                    : {}),
              },
            ]),
          ),
          ...errorResponses(op.errors),
        },
      },
    };
  }
  return paths;
}
