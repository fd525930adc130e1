import http from "node:http";
import https from "node:https";
import { formatDuration } from "@/lib/format/duration";
import { retryAfterMs } from "@/lib/ratelimit/retry-after";
import { sendTracked } from "@/lib/ratelimit/silence";
import { scaled } from "@/lib/time";
import { currentTraceHeaders, inSpan } from "@/lib/tracing/tracing";
import { describeError, snippet } from "@/lib/format/describe";
import { withLinkedSignal } from "@/lib/core/linked-signal";

/**
 * Outbound HTTP to the outside services (model endpoint, OCR, marketplace): sending one request
 * with the job's signal and an optional per-request time limit, classifying what came back, the
 * wait a server asks for (`Retry-After`, read in lib/ratelimit/retry-after.ts), the retry backoff, and the words for a failure. The
 * clients keep what is theirs: the body they send, how they read an answer, their retry policy
 * and what they record.
 */

export interface OutboundRequest {
  /** @defaultValue "POST" when there is a body, else "GET" */
  method?: string;
  url: URL;
  headers?: Record<string, string>;
  /** Sent as is, with its `content-length`; the caller names its `content-type`. */
  body?: string | Uint8Array;
  /**
   * The job's signal. When it aborts, the request is cut and the call rejects with
   * `signal.reason` itself — never wrapped — so callers tell a deadline from an outside failure
   * by that exact object.
   */
  signal?: AbortSignal;
  /**
   * This one request's time limit (real ms); running out is a `timeout` failure, not an abort.
   * @defaultValue none: the signal is the only limit, because model calls take up to ~11 min
   */
  timeoutMs?: number;
}

export interface OutboundResponse {
  status: number;
  /** A response header by case-insensitive name (the first value when repeated). */
  header(name: string): string | undefined;
  body: string;
}

/** Sends one request and reads the whole response; rejects on network errors and on abort. */
export type SendRequest = (request: OutboundRequest) => Promise<OutboundResponse>;

/**
 * One request over node:http(s) rather than `fetch`: Node's fetch gives up on a response whose
 * headers take longer than 300 s (undici's `headersTimeout`, not configurable without the undici
 * package), and production model calls take up to ~11 min. Only `signal` (and `timeoutMs`, as
 * `attemptRequest` applies it) limits the time. Any status resolves; an abort rejects with the
 * signal's reason.
 */
export const sendRequest: SendRequest = ({ method, url, headers = {}, body, signal }) =>
  new Promise<OutboundResponse>((resolve, reject) => {
    // Whatever the socket reports once the signal has fired, the signal's reason is what happened.
    const fail = (err: unknown) => reject(signal?.aborted ? signal.reason : err);
    if (signal?.aborted) return fail(signal.reason);
    const transport = url.protocol === "https:" ? https : http;
    const request = transport.request(
      url,
      {
        method: method ?? (body === undefined ? "GET" : "POST"),
        headers: body === undefined ? headers : { ...headers, "content-length": Buffer.byteLength(body) },
        signal,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("error", fail);
        // A connection cut mid-body ends the stream without `complete`; resolve() already won otherwise.
        response.on("close", () => {
          if (!response.complete) fail(new Error("connection closed before the response was complete"));
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            header: (name) => {
              const value = response.headers[name.toLowerCase()];
              return Array.isArray(value) ? value[0] : value;
            },
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    request.on("error", fail);
    request.end(body);
  });

/**
 * Why a request did not succeed:
 * - `unreachable` — no answer: connection refused or reset, DNS, a body cut short;
 * - `timeout` — no answer within the request's own `timeoutMs`;
 * - `throttled` — 429, the service's rate limit;
 * - `server_error` — 5xx or 408: the service failed, the request itself may be fine;
 * - `rejected` — any other non-2xx (4xx): the request is refused as it is.
 * Retryable: all but `rejected`. Not a failure: an attempt of kind `aborted` (the caller's signal
 * fired), whose `reason` the caller rethrows as it is.
 */
export type OutboundFailureKind = "unreachable" | "timeout" | "throttled" | "server_error" | "rejected";

export type OutboundAttempt =
  | { ok: true; response: OutboundResponse }
  | { ok: false; kind: "aborted"; retryable: false; reason: unknown }
  | { ok: false; kind: "unreachable"; retryable: true; cause: unknown }
  | { ok: false; kind: "timeout"; retryable: true; timeoutMs: number; cause: unknown }
  | {
      ok: false;
      kind: "throttled" | "server_error" | "rejected";
      retryable: boolean;
      status: number;
      response: OutboundResponse;
      /** The wait the server asked for, when it asked (`retryAfterMs`). */
      retryAfterMs: number | undefined;
    };

export type OutboundFailure = Exclude<OutboundAttempt, { ok: true } | { kind: "aborted" }>;

/** A status's class: 2xx ok; 429 throttled; 5xx and 408 server_error (worth another try); else rejected. */
export function classifyStatus(status: number): "ok" | "throttled" | "server_error" | "rejected" {
  if (status >= 200 && status < 300) return "ok";
  if (status === 429) return "throttled";
  if (status >= 500 || status === 408) return "server_error";
  return "rejected";
}

/**
 * One request, its outcome classified; never rejects. `timeoutMs` is combined with the caller's
 * signal here, so a transport that honours its signal needs to know nothing about either.
 *
 * @param send - the transport. @defaultValue `sendRequest`
 */
export async function attemptRequest(
  request: OutboundRequest,
  send: SendRequest = sendRequest,
): Promise<OutboundAttempt> {
  const { signal, timeoutMs } = request;
  const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  let response: OutboundResponse;
  try {
    // Inside a circuit breaker's guard the request is a call in flight of its service (silence
    // detection, lib/ratelimit/silence.ts): any status is an answer; the outage signal cuts it
    // when the breaker opens, and the guard then throws the outage instead of this failure.
    const method = request.method ?? (request.body === undefined ? "GET" : "POST");
    response = await sendTracked(
      `${method} ${request.url.origin}${request.url.pathname}`,
      (outage) => withLinkedSignal([signal, timeout, outage], (linked) => tracedSend(request, linked, send)),
      (outcome) => "value" in outcome,
    );
  } catch (err) {
    if (signal?.aborted) return { ok: false, kind: "aborted", retryable: false, reason: signal.reason };
    if (timeout?.aborted) return { ok: false, kind: "timeout", retryable: true, timeoutMs: timeoutMs!, cause: err };
    return { ok: false, kind: "unreachable", retryable: true, cause: err };
  }
  const kind = classifyStatus(response.status);
  if (kind === "ok") return { ok: true, response };
  return {
    ok: false,
    kind,
    retryable: kind !== "rejected",
    status: response.status,
    response,
    retryAfterMs: retryAfterMs(response),
  };
}

/**
 * The request as a client span of the current trace (a job's run), carrying that span as the
 * `traceparent` header, so the service's own traces join ours. An explicit `traceparent` header
 * of the caller's is kept.
 */
function tracedSend(
  request: OutboundRequest,
  signal: AbortSignal | undefined,
  send: SendRequest,
): Promise<OutboundResponse> {
  const method = request.method ?? (request.body === undefined ? "GET" : "POST");
  return inSpan(
    `${method} ${request.url.host}`,
    {
      kind: "client",
      attributes: {
        "http.request.method": method,
        "server.address": request.url.hostname,
        "url.path": request.url.pathname,
      },
    },
    async (span) => {
      const response = await send({ ...request, headers: { ...currentTraceHeaders(), ...request.headers }, signal });
      span.setAttribute("http.response.status_code", response.status);
      return response;
    },
  );
}

/**
 * The backoff before retry `retry` (1-based): `baseMs`–2×`baseMs`, then twice that… (production
 * ms, scaled), jittered so that a burst of failed calls does not come back in lockstep.
 */
export function backoffMs(baseMs: number, retry: number, timeScale: number): number {
  return scaled(baseMs * 2 ** (retry - 1) * (1 + Math.random()), timeScale);
}

/** The service's own words in an error body (`{ error: { message } }`, the OpenAI shape), if any. */
export function serviceMessage(body: string): string | undefined {
  try {
    const message = (JSON.parse(body) as { error?: { message?: unknown } } | null)?.error?.message;
    return typeof message === "string" && message ? message : undefined;
  } catch {
    return undefined; // not JSON: an HTML page from a proxy, for instance
  }
}

/**
 * A failure in the words a person reads, naming the service ("the marketplace"): a refusal in
 * the service's own words, a server failure with its status, else the status and a snippet of
 * the body; no answer as "could not be reached" or "did not answer within".
 */
export function describeFailure(service: string, failure: OutboundFailure): string {
  switch (failure.kind) {
    case "unreachable":
      return `${service} could not be reached (${describeError(failure.cause)})`;
    case "timeout":
      return `${service} did not answer within ${formatDuration(failure.timeoutMs)}`;
    default: {
      const { status, response } = failure;
      const message = serviceMessage(response.body);
      if (message) return status >= 500 ? `${service} failed (HTTP ${status}: ${message})` : message;
      return `${service} answered HTTP ${status}${response.body ? `: ${snippet(response.body)}` : ""}`;
    }
  }
}
