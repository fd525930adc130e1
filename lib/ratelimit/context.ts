import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The deferral context: code running inside `runWithRateLimitDeferral` is part of a job that can
 * be rescheduled, so `acquire` turns a long wait into a `RateLimitDefer` instead of sleeping in
 * the worker slot. Carried by AsyncLocalStorage, so every await inside `fn` sees the context and
 * two jobs running at the same time in one process never see each other's.
 */
interface DeferralContext {
  /** Real milliseconds (already time-scaled). */
  thresholdMs: number;
}

const storage = new AsyncLocalStorage<DeferralContext>();

/**
 * Runs `fn` in a deferral context: inside it, `acquire` sleeps through waits up to `thresholdMs`
 * and throws `RateLimitDefer` beyond. A nested call replaces the threshold for its own `fn` only.
 *
 * @param thresholdMs - real milliseconds (already time-scaled), e.g. `deferThresholdMs()`.
 */
export function runWithRateLimitDeferral<T>(thresholdMs: number, fn: () => Promise<T>): Promise<T> {
  if (!Number.isFinite(thresholdMs) || thresholdMs < 0) throw new RangeError(`deferral threshold must be a non-negative number of ms, got ${thresholdMs}`);
  return storage.run({ thresholdMs }, fn);
}

/** The current deferral threshold in real milliseconds, or undefined outside a deferral context. */
export function deferralThreshold(): number | undefined {
  return storage.getStore()?.thresholdMs;
}
