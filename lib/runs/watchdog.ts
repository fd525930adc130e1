import { Worker } from "node:worker_threads";
import { env } from "@/lib/env";
import type { HardLimitWatch } from "./processor";
import type { WatchdogData, WatchdogMessage } from "./watchdog-thread";

/**
 * Starts the hard-limit watchdog thread (see watchdog-thread.ts) and returns its feed. The thread
 * loads TypeScript through tsx (watchdog-thread-entry.mjs), like the worker process itself, so it
 * shares the runtime's typed finalize statements instead of a copy.
 */
export function startWatchdog(): HardLimitWatch & { stop(): Promise<void> } {
  const thread = new Worker(new URL("./watchdog-thread-entry.mjs", import.meta.url), {
    workerData: { databaseUrl: env().DATABASE_URL } satisfies WatchdogData,
    execArgv: [],
  });
  thread.unref();
  const post = (msg: WatchdogMessage) => thread.postMessage(msg);
  const beat = setInterval(() => post({ t: "beat" }), 100);
  beat.unref();
  return {
    start: (run) => post({ t: "start", ...run }),
    end: (jobId) => post({ t: "end", jobId }),
    stop: async () => {
      clearInterval(beat);
      await thread.terminate();
    },
  };
}
