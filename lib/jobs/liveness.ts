import { scaled } from "@/lib/time";

/**
 * How often a running job shows it is alive, and how long a silent one is given before the
 * reaper resumes it: the runtime beats at this interval, the reaper and the stuck reports judge
 * by it, and a cancel of a silent job is final at once.
 */

/** How often a running job refreshes its heartbeat, in production time. */
const HEARTBEAT_MS = 30_000;
/** How often the reaper looks, in production time. */
const REAPER_INTERVAL_MS = 60_000;

/** Real-time intervals: scaled, with floors so a tiny time scale does not turn them into busy loops. */
export const heartbeatIntervalMs = () => Math.max(scaled(HEARTBEAT_MS), 500);
export const reaperIntervalMs = () => Math.max(scaled(REAPER_INTERVAL_MS), 1000);
/** A job is silent when it has missed three heartbeats. */
export const silenceMs = () => 3 * heartbeatIntervalMs();
/** How long past its hard limit (since its last heartbeat) a job may stay non-terminal: one reaper interval. */
export const reapGraceMs = () => Math.max(reaperIntervalMs(), silenceMs());
