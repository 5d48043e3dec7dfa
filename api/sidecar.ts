// Calls to the optional sidecars (authz, mapping): one JSON POST with a timeout; an answer that
// does not come, or does not parse, is a 503 naming the sidecar.
import type { z } from 'zod';
import { HttpError } from './errors';

export async function askSidecar<S extends z.ZodType>(opts: {
  baseUrl: string;
  path: string;
  body: unknown;
  schema: S;
  /** Error code and the sidecar's name, for the 503. */
  code: string;
  name: string;
  timeoutMs?: number;
}): Promise<z.infer<S>> {
  try {
    const r = await fetch(`${opts.baseUrl.replace(/\/$/, '')}${opts.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(opts.body),
      signal: AbortSignal.timeout(opts.timeoutMs ?? 5000),
    });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    return opts.schema.parse(await r.json());
  } catch (err) {
    throw new HttpError(503, opts.code, `The ${opts.name} sidecar did not answer: ${(err as Error).message}`);
  }
}
