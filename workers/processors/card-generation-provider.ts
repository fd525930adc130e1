import { z } from "zod";
import { env } from "@/lib/env";
import type { Logger } from "@/lib/log";
import { formatDuration } from "@/lib/format/duration";
import { describeError, snippet } from "@/lib/format/describe";
import { breakers, guardCall } from "@/lib/ratelimit/breaker";
import { isOutsideServiceDown } from "@/lib/ratelimit/errors";
import { sendTracked } from "@/lib/ratelimit/silence";
import { PROVIDER_DOWNLOAD, PROVIDER_POLL, QA_CHECK, type PhasePolicy } from "@/lib/catalog/generation-policy";
import { scaled, sleep } from "@/lib/time";

/**
 * The image provider's client. Every wait is bounded by the phase policies of lib/catalog/generation-policy.ts
 * — the very objects the worst case (and so the sweep window) is computed from: a phase makes at
 * most `attempts` attempts of at most `attemptTimeoutMs` each, with no pause between them that
 * the worst case does not count. The provider has no cancel.
 */

/** The provider could not do it (after every attempt, or a refusal): the generation fails. */
export class ProviderError extends Error {
  override name = "ProviderError";
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** How often the poll asks for the status, within an attempt (production time). */
const POLL_EVERY_MS = 2_000;

const statusSchema = z.object({
  id: z.string(),
  status: z.enum(["running", "succeeded", "failed"]),
  error: z.string().optional(),
});
const submitSchema = z.object({ id: z.string().min(1) });
const qaSchema = z.object({ verdict: z.enum(["ok", "defect"]) });

export interface ProviderClient {
  /** Submits (in the first attempt) and polls until the image is ready; returns the provider's id. */
  render(prompt: string, signal: AbortSignal): Promise<string>;
  download(id: string, signal: AbortSignal): Promise<Buffer>;
  qa(id: string, signal: AbortSignal): Promise<"ok" | "defect">;
}

export interface ProviderOptions {
  /** @defaultValue `env().IMAGE_PROVIDER_BASE_URL` */
  baseUrl?: string;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  log: Logger;
}

/**
 * Runs `fn` with up to `phase.attempts` attempts, each under its own timeout; the job's signal
 * ends everything at once (rejecting with its reason, unchanged). A refusal (4xx) is not retried.
 *
 * An attempt whose time ran out without one answer from the provider (`answeredSince`) is the
 * provider's silence, not a failure of this generation: its requests (a submit, a status poll, a
 * QA check) answer within seconds, so no answer at all for the whole attempt limit is a provider
 * that accepts connections and answers nothing. When the last attempt ended so, the image
 * provider's breaker opens as silent and the generation waits for it (`OutsideServiceDown`)
 * instead of failing — one generation is a single call at a time, too few for the shared check.
 */
async function withAttempts<T>(
  name: string,
  phase: PhasePolicy,
  signal: AbortSignal,
  timeScale: number,
  log: Logger,
  answeredSince: (at: number) => boolean,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  let last: unknown;
  let silentSince: number | undefined;
  for (let attempt = 1; attempt <= phase.attempts; attempt++) {
    signal.throwIfAborted();
    const timeout = AbortSignal.timeout(Math.max(1, scaled(phase.attemptTimeoutMs, timeScale)));
    const attemptStart = Date.now();
    try {
      return await fn(AbortSignal.any([signal, timeout]));
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      // The provider is down (its circuit breaker is open): no attempt is spent on it.
      if (isOutsideServiceDown(err) || (err instanceof ProviderError && !err.retryable)) throw err;
      const silent = timeout.aborted && !answeredSince(attemptStart);
      silentSince = silent ? (silentSince ?? attemptStart) : undefined;
      last = timeout.aborted
        ? new ProviderError(
            `${name} attempt ${attempt} timed out after ${formatDuration(phase.attemptTimeoutMs)}`,
            true,
          )
        : err;
      log.warn(
        { phase: name, attempt, of: phase.attempts, silent, error: describeError(last) },
        `image provider ${name} attempt failed`,
      );
    }
  }
  if (silentSince !== undefined) {
    throw await breakers().markSilent(
      "images",
      `no answer to the ${name} within ${formatDuration(phase.attemptTimeoutMs)}, attempt after attempt`,
      new Date(silentSince),
    );
  }
  throw new ProviderError(
    `the image provider's ${name} failed ${phase.attempts} times (last: ${describeError(last)})`,
    true,
  );
}

/** What one client keeps between its calls: where the provider is, the time scale, its log, and when it last answered. */
interface ProviderState {
  base: string;
  timeScale: number;
  log: Logger;
  /** When the provider last answered this client (any status), real ms. */
  lastAnswer: number;
}

/** Whether the provider has answered this client (any status) since `at`, real ms: an attempt's silence test. */
function answeredSince(state: ProviderState): (at: number) => boolean {
  return (at) => state.lastAnswer >= at;
}

/** One HTTP request to the provider, through its circuit breaker; an answer other than 2xx is a `ProviderError`. */
async function call(
  state: ProviderState,
  method: string,
  path: string,
  signal: AbortSignal,
  body?: unknown,
): Promise<Response> {
  const { base } = state;
  let response: Response;
  try {
    // Through the image provider's circuit breaker: a 5xx or no answer feeds it, an open one
    // sends nothing; a 401 or 403 is its misconfiguration. The request is a call in flight of
    // the provider (silence detection), cut when the breaker opens.
    response = await guardCall(
      "images",
      () =>
        sendTracked(
          `${method} ${base}${path.replace(/\/generations\/[^/]+/, "/generations/{id}")}`,
          (outage) =>
            fetch(`${base}${path}`, {
              method,
              signal: outage ? AbortSignal.any([signal, outage]) : signal,
              headers:
                body === undefined
                  ? { accept: "application/json" }
                  : { "content-type": "application/json", accept: "application/json" },
              body: body === undefined ? undefined : JSON.stringify(body),
            }),
          (outcome) => "value" in outcome,
        ),
      {
        signal,
        failureOf: (r) =>
          r.status >= 500 || r.status === 408 || r.status === 401 || r.status === 403
            ? { status: r.status, message: `HTTP ${r.status}` }
            : undefined,
      },
    );
    state.lastAnswer = Date.now();
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (isOutsideServiceDown(err)) throw err;
    throw new ProviderError(`the image provider could not be reached (${describeError(err)})`, true);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => "");
    throw new ProviderError(
      `the image provider answered HTTP ${response.status}${text ? `: ${snippet(text)}` : ""}`,
      response.status >= 500 || response.status === 429 || response.status === 408,
    );
  }
  return response;
}

/**
 * The answer's body, checked. A body cut off because the attempt's own time ran out is that
 * timeout (retried by `withAttempts`), not "something unexpected" (which is final).
 */
async function json<T>(schema: z.ZodType<T>, response: Response, signal: AbortSignal): Promise<T> {
  const body = await response.json().catch(() => {
    if (signal.aborted) throw signal.reason;
    return undefined;
  });
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new ProviderError("the image provider answered something unexpected", false);
  return parsed.data;
}

/** Submits a render of `prompt`; returns the provider's id for it. */
async function submit(state: ProviderState, prompt: string, signal: AbortSignal): Promise<string> {
  return (await json(submitSchema, await call(state, "POST", "/generations", signal, { prompt }), signal)).id;
}

/** Polls the render `id` until it has succeeded (returns `id`) or failed (a final `ProviderError`). */
async function pollUntilDone(state: ProviderState, id: string, signal: AbortSignal): Promise<string> {
  for (;;) {
    const s = await json(
      statusSchema,
      await call(state, "GET", `/generations/${encodeURIComponent(id)}`, signal),
      signal,
    );
    if (s.status === "succeeded") return id;
    if (s.status === "failed")
      throw new ProviderError(`the image provider could not render the card (${s.error ?? "no reason given"})`, false);
    await sleep(Math.max(1, scaled(POLL_EVERY_MS, state.timeScale)), signal);
  }
}

/** `ProviderClient.render`: submits (in the first attempt) and polls until the image is ready; returns the provider's id. */
async function render(state: ProviderState, prompt: string, signal: AbortSignal): Promise<string> {
  let id: string | undefined;
  const { timeScale, log } = state;
  return withAttempts("poll", PROVIDER_POLL, signal, timeScale, log, answeredSince(state), async (attemptSignal) => {
    // Submitted once: a second attempt keeps polling the same render (a new submit pays twice).
    id ??= await submit(state, prompt, attemptSignal);
    return await pollUntilDone(state, id, attemptSignal);
  });
}

/** `ProviderClient.download`: the image of the finished render `id`. */
function download(state: ProviderState, id: string, signal: AbortSignal): Promise<Buffer> {
  const { timeScale, log } = state;
  return withAttempts(
    "download",
    PROVIDER_DOWNLOAD,
    signal,
    timeScale,
    log,
    answeredSince(state),
    async (attemptSignal) => {
      const response = await call(state, "GET", `/generations/${encodeURIComponent(id)}/image`, attemptSignal);
      try {
        return Buffer.from(await response.arrayBuffer());
      } catch (err) {
        if (attemptSignal.aborted) throw attemptSignal.reason;
        throw new ProviderError(`the download broke off (${describeError(err)})`, true);
      }
    },
  );
}

/** `ProviderClient.qa`: the QA check's verdict on the render `id`. */
function qa(state: ProviderState, id: string, signal: AbortSignal): Promise<"ok" | "defect"> {
  // A silent QA check is no reason to wait: the image is delivered unchecked (card-generation.ts).
  return withAttempts(
    "QA check",
    QA_CHECK,
    signal,
    state.timeScale,
    state.log,
    () => true,
    async (attemptSignal) =>
      (
        await json(
          qaSchema,
          await call(state, "POST", `/generations/${encodeURIComponent(id)}/qa`, attemptSignal, {}),
          attemptSignal,
        )
      ).verdict,
  );
}

export function createProviderClient(options: ProviderOptions): ProviderClient {
  const state: ProviderState = {
    base: (options.baseUrl ?? env().IMAGE_PROVIDER_BASE_URL).replace(/\/+$/, ""),
    timeScale: options.timeScale ?? env().BOUNDED_TIME_SCALE,
    log: options.log,
    lastAnswer: 0,
  };
  return {
    render: (prompt, signal) => render(state, prompt, signal),
    download: (id, signal) => download(state, id, signal),
    qa: (id, signal) => qa(state, id, signal),
  };
}
