// One JSON call over HTTP(S) with a CA of one's own (the embedded forge's self-signed CA), for the
// forges that have no SDK here (Gitea, GitLab). A non-2xx answer is an HttpJsonError carrying the
// status, so callers classify failures by status, never by message text.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export class HttpJsonError extends Error {
  override name = 'HttpJsonError';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** One JSON call over HTTPS; a non-2xx answer is a HttpJsonError with its status. */
export function requestJson(
  url: string,
  opts: {
    method?: string;
    headers?: Record<string, string>;
    body?: unknown;
    ca?: string | Buffer;
    timeoutMs?: number;
  },
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(
      url,
      {
        method: opts.method ?? 'GET',
        headers: {
          accept: 'application/json',
          ...(body
            ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
            : {}),
          ...opts.headers,
        },
        ...(opts.ca ? { ca: opts.ca } : {}),
        timeout: opts.timeoutMs ?? 30_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          let parsed: unknown = undefined;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            parsed = text;
          }
          if (status >= 200 && status < 300) return resolve(parsed);
          const message =
            typeof parsed === 'object' && parsed && 'message' in parsed
              ? String(parsed.message)
              : text.slice(0, 300);
          reject(new HttpJsonError(message || `HTTP ${status}`, status));
        });
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`no answer from ${new URL(url).origin} within the timeout`)),
    );
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}
