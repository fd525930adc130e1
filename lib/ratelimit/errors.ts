/**
 * The limiter's two outcomes that are not "go ahead". Both are recognised by `name`, which
 * survives worker threads and module duplication where `instanceof` may not.
 */

import { formatDuration, formatWaitSeconds } from "@/lib/format/duration";

/**
 * A control signal, never an item failure: inside a job, the scope's next token is further away
 * than the job's deferral threshold, so the job should give its worker slot back and come back
 * in `waitMs`. The processor wrapper turns it into `job.moveToDelayed(now + waitMs)` +
 * `DelayedError` (no retry attempt spent). `isControlSignal` (lib/core/signals.ts) recognises it,
 * so per-item loops and client retry policies let it through untouched.
 */
export class RateLimitDefer extends Error {
  override name = "RateLimitDefer";
  constructor(
    /** Real milliseconds (already time-scaled) until the scope's bucket has the tokens asked for. */
    readonly waitMs: number,
    /** The rate-limit scope, `family:tenant`. */
    readonly scope: string,
  ) {
    super(`rate limit ${scope}: next token in ${formatDuration(waitMs)}; rescheduling`);
  }
}

/**
 * Outside a job (an HTTP request) there is no "later": the wait would exceed the caller's cap.
 * The HTTP layer answers 429 with `Retry-After: retryAfterSeconds`.
 */
export class RateLimitCapExceeded extends Error {
  override name = "RateLimitCapExceeded";
  /** `waitMs` in whole seconds, rounded up, at least 1 (the `Retry-After` header's unit). */
  readonly retryAfterSeconds: number;
  constructor(
    /** Real milliseconds (already time-scaled) until the scope's bucket has the tokens asked for. */
    readonly waitMs: number,
    /** The rate-limit scope, `family:tenant`. */
    readonly scope: string,
  ) {
    const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
    super(`The rate limit for ${scope} is used up; try again in ${formatWaitSeconds(waitMs)}.`);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * A call asked only for a spare provider slot (`ProviderSlotOptions.spare`) and none was: every
 * slot is taken, a call waits for one, or the request rate or the tokens would make it wait.
 * Nothing was sent; the caller goes on without that call.
 */
export class NoSpareSlot extends Error {
  override name = "NoSpareSlot";
  constructor(readonly provider: string) {
    super(`no spare ${provider} slot: every slot is taken or wanted`);
  }
}

export function isNoSpareSlot(err: unknown): err is NoSpareSlot {
  return err instanceof Error && err.name === "NoSpareSlot";
}

export function isRateLimitDefer(err: unknown): err is RateLimitDefer {
  return err instanceof Error && err.name === "RateLimitDefer";
}

export function isRateLimitCapExceeded(err: unknown): err is RateLimitCapExceeded {
  return err instanceof Error && err.name === "RateLimitCapExceeded";
}

/**
 * A control signal, never an item failure: the outside service's circuit breaker is open (it is
 * down since `since`), so the call did not go out — or went out, failed for the outage, and is
 * not the item's fault. Inside a job the run stops dispatching items, releases the items in flight
 * uncommitted and gives its worker slot back until the breaker's half-open time (`waitMs`),
 * without spending an attempt, like `RateLimitDefer`. Outside a job the HTTP layer answers 503.
 */
export class OutsideServiceDown extends Error {
  override name = "OutsideServiceDown";
  /** `waitMs` in whole seconds, rounded up, at least 1 (the `Retry-After` header's unit). */
  readonly retryAfterSeconds: number;
  constructor(
    /** The service (`model`, `ocr`, `marketplace`, `images`). */
    readonly service: string,
    /** Real milliseconds (already time-scaled) until the breaker lets a probe call through. */
    readonly waitMs: number,
    /** When the breaker opened. */
    readonly since: Date,
    /** The failure that opened it, in one line ("connect ECONNREFUSED 127.0.0.1:4010"). */
    readonly error: string,
    /** What a person calls the service ("the model service"). */
    readonly serviceName: string = service,
  ) {
    super(
      `${serviceName.charAt(0).toUpperCase()}${serviceName.slice(1)} is down since ${since.toISOString()} (${error}); nothing is sent to it until it answers again.`,
    );
    this.retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
  }

  /** The same outage with `note` after its failure: why a call waits for it rather than going elsewhere. */
  withNote(note: string): OutsideServiceDown {
    return new OutsideServiceDown(this.service, this.waitMs, this.since, `${this.error}; ${note}`, this.serviceName);
  }
}

export function isOutsideServiceDown(err: unknown): err is OutsideServiceDown {
  return err instanceof Error && err.name === "OutsideServiceDown";
}
