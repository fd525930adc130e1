import type { ServerResponse } from "node:http";
import type { Logger } from "@/lib/log";
import { scaled, sleep } from "@/lib/time";
import { errorBody, sendJson, type RequestContext, type Route } from "./router";

/**
 * What the simulators of the outside services share: how long a call takes, waiting it out
 * while the caller is still there, and the 500 a simulated service answers when it fails.
 */

/** The clock and dice every simulator takes, so a test can run one fast and reproducibly. */
export interface SimulatorOptions {
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** @defaultValue `Math.random` */
  random?: () => number;
  /** How many times its drawn latency a call takes now (the failure switch's slowdown, ./faults.ts). @defaultValue 1 */
  slowdown?: () => number;
}

/** A simulator whose calls wait out a latency: its routes, and how many calls are waiting. */
export interface SimulatedService {
  routes: Route[];
  /** Requests currently waiting out their latency; 0 once every caller has gone. */
  inFlight(): number;
}

/**
 * A latency distribution in production milliseconds: a lognormal body around `medianMs` with a
 * rare uniform tail from `tailFromMs` to `maxMs` (the slow calls a budget has to live with).
 */
export interface LatencyShape {
  medianMs: number;
  sigma: number;
  /** Share of calls in the tail. */
  tailShare: number;
  tailFromMs: number;
  /** No call takes longer, tail or body. */
  maxMs: number;
}

/** One call's latency in production milliseconds (not yet time-scaled). Pure given `random`. */
export function sampleLatencyMs(shape: LatencyShape, random: () => number): number {
  const { medianMs, sigma, tailShare, tailFromMs, maxMs } = shape;
  if (random() < tailShare) return tailFromMs + random() * (maxMs - tailFromMs);
  // Box–Muller; 1 - random() is in (0, 1], so the logarithm stays finite.
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.min(maxMs, medianMs * Math.exp(sigma * z));
}

export interface CallerWait {
  /**
   * Waits out one call's latency: `latencyMs()` production milliseconds times the slowdown,
   * scaled, drawn only once the caller is known to be there. False when the caller left first — then nothing is to be
   * answered.
   */
  wait(context: Pick<RequestContext, "req" | "res">, latencyMs: () => number): Promise<boolean>;
  /** Calls currently waiting. */
  inFlight(): number;
}

/**
 * A caller that gives up (a deadline) closes the connection: the wait stops then, so a
 * minutes-long simulated call leaves no timer behind.
 */
export function createCallerWait(timeScale: number, log: Logger, slowdown: () => number = () => 1): CallerWait {
  let waiting = 0;
  return {
    async wait({ req, res }, latencyMs) {
      const gone = new AbortController();
      const onClose = () => {
        if (!res.writableEnded) gone.abort();
      };
      res.on("close", onClose);
      if (req.socket.destroyed) return false; // it left while the body was being read
      const waitMs = scaled(latencyMs() * slowdown(), timeScale);
      waiting++;
      try {
        await sleep(waitMs, gone.signal);
        return true;
      } catch {
        log.debug({ waitMs }, "caller left before the answer");
        return false;
      } finally {
        waiting--;
        res.off("close", onClose);
      }
    },
    inFlight: () => waiting,
  };
}

/** The failure a simulated service injects: a 500 in the simulators' JSON error shape. */
export function sendServerError(res: ServerResponse, message: string): void {
  sendJson(res, 500, errorBody(message, "server_error"));
}
