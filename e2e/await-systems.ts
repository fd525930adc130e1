/**
 * Waits until the tight, default and fan-out systems answer their health check, says so on stdout
 * (the runner waits for that line), and stays until the runner stops it. Those three start at once,
 * after the main system has built the web app they serve (playwright.config.ts).
 */
import { DEFAULT_URL, FANOUT_URL, TIGHT_URL } from "./env";

const healthy = async (url: string) =>
  fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) }).then(
    (res) => res.ok,
    () => false,
  );

for (const url of [TIGHT_URL, DEFAULT_URL, FANOUT_URL])
  while (!(await healthy(url))) await new Promise((resolve) => setTimeout(resolve, 250));
console.log("the other systems are up");

const stay = setInterval(() => {}, 60_000);
process.once("SIGTERM", () => clearInterval(stay));
