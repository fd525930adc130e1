import { getEventListeners } from "node:events";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { withLinkedSignal } from "./linked-signal";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

describe("withLinkedSignal", () => {
  it("aborts with the reason of the source that aborted, and is aborted at once when a source already is", async () => {
    const job = new AbortController();
    const call = new AbortController();
    const seen = withLinkedSignal([job.signal, undefined, call.signal], (signal) => {
      call.abort(new Error("the call's own timeout"));
      return Promise.resolve(signal.reason as Error);
    });
    expect((await seen).message).toBe("the call's own timeout");

    job.abort(new Error("the job was cancelled"));
    const reason = await withLinkedSignal([job.signal], (signal) => Promise.resolve(signal.aborted && signal.reason));
    expect((reason as Error).message).toBe("the job was cancelled");
  });

  it("lets go of a long-lived source once the run settles, however it settles", async () => {
    const job = new AbortController();
    await withLinkedSignal([job.signal], () => Promise.resolve("answer"));
    await withLinkedSignal([job.signal], () => Promise.reject(new Error("refused"))).catch(() => undefined);
    expect(getEventListeners(job.signal, "abort")).toHaveLength(0);
  });

  it("keeps nothing on the job's signal for its calls: 50,000 calls, each with a listener on its signal as a client adds", async () => {
    const job = new AbortController();
    const call = async () =>
      withLinkedSignal([job.signal], async (signal) => {
        signal.addEventListener("abort", () => undefined);
      });
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 50_000; i++) await call();
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
    // AbortSignal.any([job.signal]) here keeps about 55 MB (a kilobyte a call) until the job's signal aborts.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(5 * 1024 * 1024);
  });
});
