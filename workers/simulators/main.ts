/**
 * The simulators of the outside services (model endpoint now; marketplace and image provider
 * later), on one port: `npm run start:sim`.
 */
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { startSimulators } from "./server";

const log = logger("simulators");
const { BOUNDED_SIM_PORT, BOUNDED_SIM_HOST, BOUNDED_TIME_SCALE, BOUNDED_SIM_MODEL_ERROR_RATE, BOUNDED_SIM_SILENT } =
  env();

let simulators: Awaited<ReturnType<typeof startSimulators>>;
try {
  simulators = await startSimulators({ port: BOUNDED_SIM_PORT, host: BOUNDED_SIM_HOST });
} catch (err) {
  log.fatal({ err, port: BOUNDED_SIM_PORT }, "simulators could not start");
  process.exit(1);
}

// A time scale other than 1 changes every duration, so it is said loudly.
log[BOUNDED_TIME_SCALE === 1 ? "info" : "warn"](
  { url: simulators.url, timeScale: BOUNDED_TIME_SCALE, modelErrorRate: BOUNDED_SIM_MODEL_ERROR_RATE },
  `simulators listening on ${simulators.url} (time scale ${BOUNDED_TIME_SCALE})`,
);
if (BOUNDED_SIM_SILENT.length > 0)
  log.warn(
    { silent: BOUNDED_SIM_SILENT },
    `silent from the start (accepting calls, answering none): ${BOUNDED_SIM_SILENT.join(", ")}`,
  );

let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "simulators stopping");
  try {
    await simulators.close();
  } catch (err) {
    log.error({ err }, "simulators did not close cleanly");
  }
  process.exit(0);
}
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));
