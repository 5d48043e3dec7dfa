// Errors at the edge: {"error": {"code", "message"}} with a 4xx for anything the caller got wrong.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import { RegistryError } from '../shared/infra/db/runners';

/** Every error answer's body. */
export const errorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    /** The request field at fault, when one is. */
    field: z.string().optional(),
  }),
});

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field at fault, when one is. */
    readonly field?: string,
  ) {
    super(message);
  }
}

/** A registry's refusal (not found, conflict, invalid) as the HTTP error it is. */
export function registryError(err: unknown): never {
  if (err instanceof RegistryError) {
    const status = { not_found: 404, conflict: 409, invalid: 400 }[err.kind];
    throw new HttpError(status, err.kind === 'invalid' ? 'invalid_request' : err.kind, err.message);
  }
  throw err;
}

/** gRPC UNAVAILABLE (14) or DEADLINE_EXCEEDED (4) from the Temporal client, or a refused connection. */
export function isTemporalUnavailable(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; e && depth < 5; depth++) {
    const x = e as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown };
    if (x.code === 14 || x.code === 4) return true;
    if (
      x.name === 'ServiceError' &&
      typeof x.message === 'string' &&
      /UNAVAILABLE|DEADLINE_EXCEEDED|connect/i.test(x.message)
    ) {
      return true;
    }
    e = x.cause;
  }
  return false;
}

export const notFound: RequestHandler = (req, res) => {
  res.status(404).json({ error: { code: 'not_found', message: `No route for ${req.method} ${req.path}` } });
};

export function errorHandler(log: (err: unknown) => void): ErrorRequestHandler {
  return (err: unknown, _req, res, _next) => {
    if (err instanceof HttpError) {
      res.status(err.status).json({
        error: { code: err.code, message: err.message, ...(err.field ? { field: err.field } : {}) },
      });
      return;
    }
    // body-parser errors carry a 4xx status: malformed JSON, a body too large.
    const e = err as {
      status?: unknown;
      type?: unknown;
      message?: unknown;
      limit?: unknown;
      length?: unknown;
    };
    if (e.type === 'entity.too.large' && typeof e.limit === 'number') {
      res.status(413).json({
        error: {
          code: 'body_too_large',
          message: `The request body${typeof e.length === 'number' ? ` (${e.length} bytes)` : ''} is larger than the ${e.limit}-byte limit; nothing was done.`,
        },
      });
      return;
    }
    if (typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
      const code = typeof e.type === 'string' ? e.type.replace(/\./g, '_') : 'bad_request';
      const message = typeof e.message === 'string' ? e.message : 'Bad request';
      res.status(e.status).json({ error: { code, message } });
      return;
    }
    if (isTemporalUnavailable(err)) {
      res.status(503).json({
        error: {
          code: 'temporal_unavailable',
          message: 'Temporal is unreachable right now; nothing was started. Retry in a moment.',
        },
      });
      return;
    }
    log(err);
    res.status(500).json({ error: { code: 'internal', message: 'Internal error' } });
  };
}
