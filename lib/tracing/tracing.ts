import { AsyncLocalStorage } from "node:async_hooks";
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { formatTraceparent, newSpanId, newTraceId, type TraceContext } from "./traceparent";

/**
 * One trace from a web request to the job it starts and the job's outbound calls. The current
 * trace context lives in an AsyncLocalStorage of our own, so the W3C `traceparent` is carried
 * whether or not spans are exported: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, `startTracing()`
 * starts the OpenTelemetry SDK and every `inSpan` records a span; unset, no SDK is loaded and
 * `inSpan` only mints span ids (no span objects, nothing buffered).
 */

interface Tracing {
  tracer: Tracer;
  shutdown(): Promise<void>;
}

// On globalThis: Next.js may load this module once per route bundle, and they must share one.
const holder = globalThis as unknown as {
  __boundedTracing?: Tracing;
  __boundedTraceStore?: AsyncLocalStorage<TraceContext>;
};

function traceStore(): AsyncLocalStorage<TraceContext> {
  holder.__boundedTraceStore ??= new AsyncLocalStorage<TraceContext>();
  return holder.__boundedTraceStore;
}

/**
 * Starts exporting spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (or to `exporter`, for tests);
 * otherwise does nothing. Returns the function that flushes and stops it. Once per process.
 */
export async function startTracing(options: { exporter?: SpanExporter } = {}): Promise<() => Promise<void>> {
  const e = env();
  if (holder.__boundedTracing) return () => Promise.resolve();
  if (!options.exporter && !e.OTEL_EXPORTER_OTLP_ENDPOINT) return () => Promise.resolve();
  // Loaded only when used: a process without an endpoint never loads the SDK.
  const [{ NodeTracerProvider }, { BatchSpanProcessor, SimpleSpanProcessor }, { resourceFromAttributes }] =
    await Promise.all([
      import("@opentelemetry/sdk-trace-node"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/resources"),
    ]);
  // A test's exporter gets each span as it ends; the collector gets them in batches.
  const processor = options.exporter
    ? new SimpleSpanProcessor(options.exporter)
    : new BatchSpanProcessor(
        new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter({
          url: `${e.OTEL_EXPORTER_OTLP_ENDPOINT!.replace(/\/+$/, "")}/v1/traces`,
        }),
      );
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": e.OTEL_SERVICE_NAME }),
    spanProcessors: [processor],
  });
  const tracing: Tracing = { tracer: provider.getTracer("bounded"), shutdown: () => provider.shutdown() };
  holder.__boundedTracing = tracing;
  if (!options.exporter)
    logger("tracing").info(
      { endpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT, service: e.OTEL_SERVICE_NAME },
      "exporting trace spans",
    );
  return async () => {
    if (holder.__boundedTracing === tracing) holder.__boundedTracing = undefined;
    await tracing.shutdown();
  };
}

/** The trace context of the code running now (a request, a job run, an outbound call), if any. */
export function currentTraceContext(): TraceContext | undefined {
  return traceStore().getStore();
}

/** The `traceparent` to hand on from here (into a job's data), if a trace is running. */
export function currentTraceparent(): string | undefined {
  const context = currentTraceContext();
  return context && formatTraceparent(context);
}

/**
 * The headers that carry the current trace to another service: `{ traceparent }` inside a
 * request or a job, `{}` elsewhere. For clients that take per-request headers (the OpenAI SDK's
 * `headers` option).
 */
export function currentTraceHeaders(): Record<string, string> {
  const traceparent = currentTraceparent();
  return traceparent ? { traceparent } : {};
}

const KINDS = {
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  consumer: SpanKind.CONSUMER,
  internal: SpanKind.INTERNAL,
} as const;

export interface SpanOptions {
  kind: keyof typeof KINDS;
  /** The span to continue: @defaultValue the current context; `null` starts a new trace. */
  parent?: TraceContext | null;
  attributes?: Attributes;
}

/** Control signals a span ends with that are not failures (a run moved to *delayed*). */
const NOT_FAILURES = new Set(["DelayedError"]);

/**
 * Runs `fn` as a span: inside it the span is the current context (what `currentTraceHeaders`
 * hands on). A thrown error marks the span as failed and is rethrown as it is. Without the SDK,
 * `fn` gets a non-recording span and the context only gets a fresh span id.
 */
export async function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  const parent = options.parent === undefined ? currentTraceContext() : options.parent;
  const tracing = holder.__boundedTracing;
  if (!tracing) {
    const context: TraceContext = {
      traceId: parent?.traceId ?? newTraceId(),
      spanId: newSpanId(),
      sampled: parent?.sampled ?? false,
    };
    return traceStore().run(context, () => fn(trace.wrapSpanContext(spanContextOf(context))));
  }
  const parentContext = parent
    ? trace.setSpanContext(ROOT_CONTEXT, { ...spanContextOf(parent), isRemote: true })
    : ROOT_CONTEXT;
  const span = tracing.tracer.startSpan(
    name,
    { kind: KINDS[options.kind], attributes: options.attributes },
    parentContext,
  );
  const own = span.spanContext();
  const context: TraceContext = {
    traceId: own.traceId,
    spanId: own.spanId,
    sampled: (own.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
  };
  try {
    return await traceStore().run(context, () => fn(span));
  } catch (err) {
    if (!(err instanceof Error && NOT_FAILURES.has(err.name))) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    }
    throw err;
  } finally {
    span.end();
  }
}

function spanContextOf(context: TraceContext) {
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    traceFlags: context.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
  };
}
