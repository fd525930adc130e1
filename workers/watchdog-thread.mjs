// The hard-limit watchdog: a worker thread, so it keeps running when a processor blocks the
// main event loop (a CPU loop ignores every signal and timer). The main thread reports each
// run's hard limit and beats every 100 ms. When a run is past its hard limit and the main thread
// has stopped beating, the main thread cannot enforce the limit itself: the watchdog finalizes
// the row as `killed` (fenced by its attempt) and SIGKILLs the process, whose supervisor starts a
// new one; the other runs of this process are picked up again by the queue at their cursors.
import { parentPort, workerData } from "node:worker_threads";
import pg from "pg";

const { databaseUrl, graceMs = 1000, blockedMs = 1000 } = workerData;
const runs = new Map();
let lastBeat = Date.now();

parentPort.on("message", (msg) => {
  if (msg.t === "beat") lastBeat = Date.now();
  else if (msg.t === "start") runs.set(msg.jobId, msg);
  else if (msg.t === "end") runs.delete(msg.jobId);
});

async function killRun(run) {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("BEGIN");
    const { rows } = await client.query(
      `SELECT kind, total, processed, failed, "budgetSoftMs", "budgetHardMs" FROM "Job"
       WHERE id = $1 AND attempt = $2 AND status IN ('running', 'timed_out') FOR UPDATE`,
      [run.jobId, run.attempt],
    );
    if (rows[0]) {
      const r = rows[0];
      const done = r.processed + r.failed;
      const of = r.total === null ? `${done.toLocaleString("en-US")} items` : `${done.toLocaleString("en-US")} of ${r.total.toLocaleString("en-US")} ${run.noun}s`;
      const message = `Stopped at the hard limit after ${of} (hard limit ${Math.round(r.budgetHardMs / 1000).toLocaleString("en-US")} s): the job blocked its worker, which was restarted. Nothing it does from now on is saved.`;
      await client.query(`UPDATE "Job" SET status = 'killed', message = $2, "finishedAt" = now() AT TIME ZONE 'UTC', "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC' WHERE id = $1`, [run.jobId, message]);
      await client.query(`INSERT INTO "JobEvent" ("jobId", type, attempt, message, at) VALUES ($1, 'killed', $2, $3, now() AT TIME ZONE 'UTC')`, [run.jobId, run.attempt, message]);
    }
    await client.query("COMMIT");
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
      process.stderr.write(`watchdog: could not finalize ${run.jobId}: ${err?.message}\n`);
    }
  }
  process.stderr.write(`watchdog: the event loop has been blocked for ${now - lastBeat} ms past a hard limit; killing the worker process\n`);
  process.kill(process.pid, "SIGKILL");
}, 100).unref?.();
