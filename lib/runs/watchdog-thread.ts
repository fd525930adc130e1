// The hard-limit watchdog: a worker thread, so it keeps running when a processor blocks the
// main event loop (a CPU loop ignores every signal and timer). The main thread reports each
// run's hard limit and beats every 100 ms. When a run is past its hard limit and the main thread
// has stopped beating, the main thread cannot enforce the limit itself: the watchdog finalizes
// the row as `killed` with the runtime's own statements (lib/runs/finalize-statement.ts, fenced
// by its attempt) and SIGKILLs the process, whose supervisor starts a new one; the other runs of
// this process are picked up again by the queue at their cursors.
import { parentPort, workerData } from "node:worker_threads";
import pg from "pg";
import { finalRowOf, killedMessage } from "@/lib/jobs/messages";
import { finalizeStatement, finalMessageStatement, type FinalizedRow } from "./finalize-statement";

export interface WatchdogData {
  databaseUrl: string;
  /** Real ms past the hard limit before the watchdog acts. */
  graceMs?: number;
  /** Real ms without a beat from the main thread that count as a blocked event loop. */
  blockedMs?: number;
}

export type WatchdogMessage =
  | { t: "beat" }
  | { t: "start"; jobId: string; attempt: number; hardAt: number; kind: string }
  | { t: "end"; jobId: string };

type WatchedRun = Extract<WatchdogMessage, { t: "start" }>;

const { databaseUrl, graceMs = 1000, blockedMs = 1000 } = workerData as WatchdogData;
const runs = new Map<string, WatchedRun>();
let lastBeat = Date.now();

parentPort!.on("message", (msg: WatchdogMessage) => {
  if (msg.t === "beat") lastBeat = Date.now();
  else if (msg.t === "start") runs.set(msg.jobId, msg);
  else runs.delete(msg.jobId);
});

/** `finalizeJob`'s `killed`, through `pg`: the same statements, the same row, the same event. */
async function killRun(run: WatchedRun): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const flip = finalizeStatement({
      jobId: run.jobId,
      attempt: run.attempt,
      status: "killed",
      terminal: true,
      from: ["running", "timed_out"],
      result: null,
      early: null,
    });
    const { rows } = await client.query<FinalizedRow>(flip.text, flip.values);
    const row = rows[0];
    if (!row) return;
    const follow = finalMessageStatement(
      run.jobId,
      run.attempt,
      row.status,
      killedMessage(finalRowOf(row), "blocked_worker"),
    );
    await client.query(follow.text, follow.values);
  } finally {
    await client.end().catch(() => {});
  }
}

setInterval(async () => {
  const now = Date.now();
  if (now - lastBeat < blockedMs) return;
  const overdue = [...runs.values()].filter((r) => now > r.hardAt + graceMs);
  if (overdue.length === 0) return;
  for (const run of overdue) {
    try {
      await killRun(run);
    } catch (err) {
      process.stderr.write(
        `watchdog: could not finalize ${run.jobId}: ${err instanceof Error ? err.message : String(err)}\n`,
      );
    }
  }
  process.stderr.write(
    `watchdog: the event loop has been blocked for ${now - lastBeat} ms past a hard limit; killing the worker process\n`,
  );
  process.kill(process.pid, "SIGKILL");
}, 100).unref?.();
