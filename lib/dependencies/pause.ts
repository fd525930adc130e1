/**
 * Waiting out a PostgreSQL or Redis outage inside a job: whoever meets the outage waits one
 * backoff step, and everyone else of the same job who meets it meanwhile waits the same step, so
 * a job with hundreds of items in flight probes the dependency once per step, not hundreds of
 * times. The wait takes the job's signal: time spent waiting counts against the job's budget like
 * any other wait, and the deadline ends it.
 */
import type { Logger } from "@/lib/log";
import { sleep, unscaled } from "@/lib/time";
import { isDependencyUnavailable, unavailableDependency } from "./unavailable";

/** Real time, not scaled: an outage lasts as long as it lasts, whatever the time scale. */
const FIRST_STEP_MS = 250;
const MAX_STEP_MS = 5_000;

/** The n-th wait (from 0) of one outage: doubling from 250 ms up to 5 s. */
export function outageBackoffMs(failures: number): number {
  return Math.min(FIRST_STEP_MS * 2 ** failures, MAX_STEP_MS);
}

export class DependencyPause {
  private current: Promise<void> | null = null;
  private failures = 0;
  private since: number | null = null;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly signal: AbortSignal,
    private readonly log?: Logger,
  ) {}

  /** True while an outage has been met and no call has gone through since. */
  get paused(): boolean {
    return this.since !== null;
  }

  /**
   * Waits one backoff step because `err` says a dependency is down (rejects with the signal's
   * reason when it aborts). The first wait of an outage is logged once.
   */
  wait(err: unknown): Promise<void> {
    if (this.since === null) {
      this.since = Date.now();
      this.log?.warn(
        { dependency: unavailableDependency(err), err: err instanceof Error ? err.message : String(err) },
        "a dependency is not reachable: pausing until it answers",
      );
    }
    this.current ??= sleep(outageBackoffMs(this.failures++), this.signal).finally(() => (this.current = null));
    return this.current;
  }

  /**
   * Resolves once no outage is going on (a call went through since), or when the pause's signal
   * or `also` aborts: a dispatcher waits here before it starts more work.
   */
  idle(also?: AbortSignal): Promise<void> {
    if (this.since === null || this.signal.aborted || also?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        this.signal.removeEventListener("abort", done);
        also?.removeEventListener("abort", done);
        resolve();
      };
      this.waiters.add(done);
      this.signal.addEventListener("abort", done, { once: true });
      also?.addEventListener("abort", done, { once: true });
    });
  }

  /** A call went through: the outage, if there was one, is over. */
  recovered(): void {
    if (this.since === null) return;
    this.log?.info({ pausedMs: unscaled(Date.now() - this.since) }, "the dependency answers again: continuing");
    this.since = null;
    this.failures = 0;
    for (const wake of [...this.waiters]) wake();
  }
}

/** `fn()`, tried again after each backoff step for as long as it fails because a dependency is down. */
export async function whileUnavailable<T>(fn: () => Promise<T>, pause: DependencyPause): Promise<T> {
  for (;;) {
    try {
      const value = await fn();
      pause.recovered();
      return value;
    } catch (err) {
      if (!isDependencyUnavailable(err)) throw err;
      await pause.wait(err);
    }
  }
}
