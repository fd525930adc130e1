import { Worker } from "node:worker_threads";
import { env } from "@/lib/env";
import { nounOf } from "@/lib/jobs/run";
import type { HardLimitWatch } from "./runtime";

/** Starts the hard-limit watchdog thread (see watchdog-thread.mjs) and returns its feed. */
export function startWatchdog(): HardLimitWatch & { stop(): Promise<void> } {
  const thread = new Worker(new URL("./watchdog-thread.mjs", import.meta.url), {
    workerData: { databaseUrl: env().DATABASE_URL },
    execArgv: [],
  });
  thread.unref();
  const beat = setInterval(() => thread.postMessage({ t: "beat" }), 100);
  beat.unref();
  return {
    start: (run) => thread.postMessage({ t: "start", ...run, noun: nounOf(run.kind) }),
    end: (jobId) => thread.postMessage({ t: "end", jobId }),
    stop: async () => {
      clearInterval(beat);
      await thread.terminate();
    },
  };
}
