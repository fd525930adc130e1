/**
 * Calls that arrive while one batch is being answered wait, and go together in the next batch: one
 * round trip for what hundreds of items in flight ask at about the same time, and no waiting at all
 * for a call that arrives when nothing is running (it goes alone, at once). At most `max` inputs
 * go in one batch; the rest wait for the next.
 *
 * `run` answers a batch with one output per input, in order. If it throws, every call of that
 * batch rejects with its error; the next batch is run all the same.
 */
export function coalesce<I, O>(run: (batch: I[]) => Promise<readonly O[]>, max = 100): (input: I) => Promise<O> {
  let waiting: { input: I; resolve(output: O): void; reject(reason: unknown): void }[] = [];
  let running = false;

  async function drain(): Promise<void> {
    running = true;
    try {
      while (waiting.length > 0) {
        const batch = waiting.slice(0, max);
        waiting = waiting.slice(batch.length);
        try {
          const outputs = await run(batch.map((w) => w.input));
          if (outputs.length !== batch.length)
            throw new Error(`a batch of ${batch.length} was answered with ${outputs.length} outputs`);
          for (const [i, w] of batch.entries()) w.resolve(outputs[i]!);
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      running = false;
    }
  }

  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!running) void drain();
    });
}
