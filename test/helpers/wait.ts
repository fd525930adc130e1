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
}

/**
 * Probes until `probe` returns a truthy value and resolves with it; fails naming `what` once
 * `timeoutMs` have passed. An error thrown by the probe fails the wait at once: a broken probe is
 * a bug of the test, not a state that is not there yet.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, options: WaitForOptions): Promise<Exclude<T, false | 0 | "" | null | undefined>> {
  const interval = options.intervalMs ?? 10;
  const deadline = performance.now() + options.timeoutMs;
  let last: T;
  for (;;) {
    last = await probe();
    if (last) return last as Exclude<T, false | 0 | "" | null | undefined>;
    if (performance.now() > deadline) throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what} (last probe: ${String(last)})`);
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}
