// The API client, typed from the OpenAPI document the API serves (schema.d.ts is generated from it
// by `npm run web:types`): a route that changes its path, method or parameters breaks this build.
// Requests go to the same origin with the session cookie; every one carries the CSRF header the API
// asks of cookie-authenticated writes.
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema';

const csrf: Middleware = {
  onRequest({ request }) {
    request.headers.set('x-kumoss-csrf', '1');
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });
api.use(csrf);

/** The API's error body `{error: {code, message}}`, or a message for anything else. */
export function errorMessage(error: unknown, fallback = 'Something went wrong.'): string {
  if (typeof error === 'object' && error && 'error' in error) {
    const e = (error as { error?: { message?: unknown } }).error;
    if (typeof e?.message === 'string') return e.message;
  }
  return fallback;
}

/** The JSON body of a route's answer, as the OpenAPI document declares it. */
export type Answer<
  P extends keyof paths,
  M extends keyof paths[P],
  S extends number = 200,
> = paths[P][M] extends { responses: Record<S, { content: { 'application/json': infer B } }> } ? B : never;

export type Me = Answer<'/api/v1/auth/me', 'get'>['user'];

export type SessionSummary = Answer<'/api/v1/sessions', 'get'>['sessions'][number];

/** The data of an API answer, or an Error carrying the API's message. */
export async function ok<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const r = await p;
  if (r.response.status >= 400) throw new Error(errorMessage(r.error, `HTTP ${r.response.status}`));
  return r.data as T;
}
