// OpenTelemetry traces, off unless an OTLP endpoint is configured (observability.otlp_endpoint or
// the standard OTEL_EXPORTER_OTLP_ENDPOINT): one trace from the API request through the
// workflows (@temporalio/interceptors-opentelemetry carries the context in Temporal headers) and
// their activities to each engine call. With tracing off the OpenTelemetry API is its own no-op:
// the spans below cost nothing.
import { SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

export interface Tracing {
  resource: Resource;
  spanProcessor: SpanProcessor;
  shutdown(): Promise<void>;
}

/**
 * Registers a tracer provider for this process when `endpoint` (OTLP over HTTP, e.g.
 * http://collector:4318) or a span processor (tests: an in-memory exporter) is given; else
 * undefined, and tracing stays off.
 */
export function startTracing(opts: {
  service: string;
  endpoint?: string;
  spanProcessor?: SpanProcessor;
}): Tracing | undefined {
  const spanProcessor =
    opts.spanProcessor ??
    (opts.endpoint
      ? new BatchSpanProcessor(
          new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` }),
        )
      : undefined);
  if (!spanProcessor) return undefined;
  const resource = new Resource({ 'service.name': opts.service });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  // The AsyncLocalStorage context manager and the W3C trace-context propagator.
  provider.register();
  return { resource, spanProcessor, shutdown: () => provider.shutdown() };
}

export const tracer = () => trace.getTracer('kumoss');

/** Runs `fn` in a span named `name`; the span records a thrown error and ends with `fn`. */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  kind: SpanKind = SpanKind.INTERNAL,
): Promise<T> {
  return tracer().startActiveSpan(name, { attributes, kind }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}
