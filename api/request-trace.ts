// The HTTP server span of every API request (shared/infra/tracing.ts: off unless tracing is on, then
// the OpenTelemetry API's no-op).
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { tracer } from '../shared/infra/tracing';
import { matchedRoute } from './metrics';

interface TracedRequest {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  baseUrl: string;
  route?: unknown;
}
interface TracedResponse {
  statusCode: number;
  once(event: 'close', cb: () => void): unknown;
}

/**
 * The HTTP server span of every request (Express middleware): the caller's `traceparent` is its
 * parent, the handlers (and the Temporal client calls they make) run inside it, and it ends with
 * the response, named by the route the request matched.
 */
export function traceRequests() {
  return (req: TracedRequest, res: TracedResponse, next: () => void): void => {
    const parent = propagation.extract(context.active(), req.headers);
    const span = tracer().startSpan(
      `${req.method} request`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } },
      parent,
    );
    res.once('close', () => {
      const route = matchedRoute(req);
      if (route) {
        span.updateName(`${req.method} ${route}`);
        span.setAttribute('http.route', route);
      }
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}
