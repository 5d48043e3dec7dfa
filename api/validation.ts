// zod at the edge: a rejected body is a 400 naming the field, and nothing happens.
import type { z } from 'zod';
import { HttpError } from './errors';

export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, 'invalid_request', 'The body must be a JSON object.');
  }
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field =
    issue?.path.join('.') || (issue?.code === 'unrecognized_keys' ? (issue.keys ?? []).join(', ') : 'body');
  const message =
    issue?.code === 'unrecognized_keys'
      ? `Unknown field(s): ${(issue.keys ?? []).join(', ')}.`
      : `${field}: ${issue?.message ?? 'invalid'}`;
  throw new HttpError(400, 'invalid_request', message, field);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A path parameter that must be a UUID: anything else names nothing there is (404). */
export function uuidParam(value: unknown, what: string): string {
  const v = String(value);
  if (!UUID.test(v)) throw new HttpError(404, 'not_found', `${what} ${v} not found.`);
  return v;
}
