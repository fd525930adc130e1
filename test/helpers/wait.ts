import { inspect } from "node:util";

export interface WaitForOptions {
  /**
   * How long the state may take before the test fails. Generous on purpose: a test waits for a
   * state, never for a guess at how long it takes; a slow machine only makes it slower, not red.
   */
  timeoutMs: number;
  /** The state waited for, as the failure message names it ("the sync to be delayed"). */
  what: string;
  /**
   * Pause between two probes.
   * @defaultValue 10
   */
  intervalMs?: number;
  /**
   * Whether a probe that throws means "not yet" rather than a broken test: a server still starting
   * refuses the probe's connection. The last error is named when the wait times out.
   * @defaultValue false
   */
  retryErrors?: boolean;
}

type Truthy<T> = Exclude<T, false | 0 | "" | null | undefined>;

/**
 * Probes until `probe` returns a truthy value and resolves with it; fails naming `what` and the
 * last probe once `timeoutMs` have passed. An error thrown by the probe fails the wait at once
 * unless `retryErrors` says the state may not be probeable yet: a broken probe is a bug of the
 * test, not a state that is not there yet.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, options: WaitForOptions): Promise<Truthy<T>> {
  const interval = options.intervalMs ?? 10;
  const deadline = performance.now() + options.timeoutMs;
  let last: { value: T } | { error: unknown };
  for (;;) {
    try {
      last = { value: await probe() };
      if (last.value) return last.value as Truthy<T>;
    } catch (error) {
      if (!options.retryErrors) throw error;
      last = { error };
    }
    if (performance.now() > deadline) {
      const seen =
        "value" in last ? inspect(last.value, { depth: 3, breakLength: Infinity }) : `threw ${String(last.error)}`;
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what} (last probe: ${seen})`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/**
 * Waits, when a minute ends within `marginMs`, until the next one has begun: a test whose calls
 * must fall in one minute (refusals are counted per address and minute, lib/audit/refusals.ts)
 * starts far enough from the edge.
 */
export async function awayFromMinuteEdge(marginMs = 5_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
