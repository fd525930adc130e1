/**
 * `run` with a signal that aborts when any of `sources` does (with that source's reason), and that
 * lets go of the sources when `run` settles. `AbortSignal.any` does not let go: a source keeps
 * every signal made from it until the source itself aborts (on Node 20, 58 bytes each, and about a
 * kilobyte for one with a listener — every request's client adds one). A run's signal lives as long
 * as its job, and a call was made from it for every batch of rows: the worker's memory grew with
 * the file.
 */
export async function withLinkedSignal<T>(
  sources: readonly (AbortSignal | undefined)[],
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const linked = new AbortController();
  const live = sources.filter((s): s is AbortSignal => s !== undefined);
  const aborted = live.find((s) => s.aborted);
  if (aborted) {
    linked.abort(aborted.reason);
    return run(linked.signal);
  }
  const onAbort = (event: Event) => linked.abort((event.target as AbortSignal).reason);
  for (const source of live) source.addEventListener("abort", onAbort, { once: true });
  try {
    return await run(linked.signal);
  } finally {
    for (const source of live) source.removeEventListener("abort", onAbort);
  }
}
