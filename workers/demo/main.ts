/**
 * The demo traffic process (`BOUNDED_DEMO=1`, the default of `npm start`): starts a steady mix of
 * work through the same functions the API uses. Stops on SIGTERM/SIGINT.
 */
import { closeDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { closeQueues } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { runDemoTraffic } from "./traffic";

const log = logger("demo");
const stop = new AbortController();
process.once("SIGTERM", () => stop.abort());
process.once("SIGINT", () => stop.abort());

log.warn(
  { timeScale: env().BOUNDED_TIME_SCALE },
  "demo traffic on: starting imports, OCR batches, agent runs, syncs and card generations for demo-01 … demo-20",
);
await runDemoTraffic({ log, signal: stop.signal });
await closeQueues();
await closeRedis();
await closeDb();
process.exit(0);
