import { env } from "@/lib/env";

/**
 * A production duration in this process's time: `ms × BOUNDED_TIME_SCALE`, rounded, never
 * negative. Every duration the system uses goes through here, so tests and demos keep the
 * production ratios (median model call vs. budget vs. sweep window) in a fraction of the time.
 *
 * @param scale - the factor to apply. @defaultValue `env().BOUNDED_TIME_SCALE`
 */
export function scaled(ms: number, scale: number = env().BOUNDED_TIME_SCALE): number {
  return Math.max(0, Math.round(ms * scale));
}

/**
 * A duration measured in this process's time, in production milliseconds: `ms ÷ BOUNDED_TIME_SCALE`,
 * never negative (the inverse of `scaled`). Whatever is shown, exported or logged as a duration
 * goes through here, so pages, metrics and logs read in one unit — production time — at any scale.
 *
 * @param scale - the factor the process runs at. @defaultValue `env().BOUNDED_TIME_SCALE`
 */
export function unscaled(ms: number, scale: number = env().BOUNDED_TIME_SCALE): number {
  return Math.max(0, ms / scale);
}

/**
 * Waits `ms` milliseconds of wall-clock time (not scaled: pass `scaled(x)` for a production
 * duration). When `signal` aborts, rejects with `signal.reason` unchanged, because callers tell
 * control signals such as `DeadlineExceeded` apart with `instanceof`. Either way the timer and
 * the abort listener are removed, so a long-lived job signal does not collect listeners.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
