import { randomBytes } from "node:crypto";

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header that ties a
 * web request, the job it starts and the job's outbound calls into one trace. Parsed strictly: a
 * malformed header starts a new trace rather than corrupting one.
 */

export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  traceId: string;
  /** The id of the span this context continues: 16 lowercase hex digits, not all zero. */
  spanId: string;
  /** The `sampled` flag: whether the caller records this trace. */
  sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** A `traceparent` value as a context; null when absent or malformed (version ff, all-zero ids). */
export function parseTraceparent(value: string | null | undefined): TraceContext | null {
  const match = value ? TRACEPARENT.exec(value.trim()) : null;
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string | undefined,
  ];
  // Version 00 has exactly four fields; a later version may append more, ff is invalid.
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 };
}

export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.sampled ? "01" : "00"}`;
}

export function newTraceId(): string {
  return randomBytes(16).toString("hex");
}

export function newSpanId(): string {
  return randomBytes(8).toString("hex");
}
