/**
 * A model call that failed for good: the last attempt's failure, after any retries. An item
 * failure for the caller, never a control signal — an aborted call rejects with the signal's
 * reason instead, so a deadline is never mistaken for a bad item.
 */
export class ModelCallError extends Error {
  override name = "ModelCallError";
  /** HTTP status of the last attempt; undefined when no response arrived (network error). */
  readonly status: number | undefined;
  /** HTTP attempts made, retries included. */
  readonly attempts: number;
  /** Whether another attempt later could succeed (5xx, 429, network) — for the caller's policy. */
  readonly retryable: boolean;
  /** The wait the server asked for (429 / 503 with Retry-After), when it asked for one. */
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    details: { status?: number; attempts: number; retryable: boolean; retryAfterMs?: number; cause?: unknown },
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.status = details.status;
    this.attempts = details.attempts;
    this.retryable = details.retryable;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/**
 * The reason a request is cancelled when the same question was answered elsewhere first (a call
 * sent again on the next provider of its route to meet its job's deadline): recorded as
 * `superseded`, never as a failure or a cut by the job.
 */
export class CallSuperseded extends Error {
  override name = "CallSuperseded";
}

/**
 * A call refused a fallback provider because its cost would take the job or its tenant past the
 * failover cost ceiling (./failover-spend.ts). A control signal inside `chatCompletion` only: the
 * call then waits for the provider before it, and the job's message carries `message`.
 */
export class FailoverRefused extends Error {
  override name = "FailoverRefused";
}
