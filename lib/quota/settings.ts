import { resolveBudgetUnchecked } from "@/lib/budgets/budgets";
import { env, type Env } from "@/lib/env";
import { KINDS } from "@/lib/catalog/catalog";
import { scaled } from "@/lib/time";
import {
  GENERATION_POLICY,
  reservationProblems,
  ReservationPolicyError,
  SWEEP_POLICY,
  type SweepPolicy,
} from "@/lib/catalog/generation-policy";

/** The sweep policy this process uses: the defaults, with the window from the environment when set. */
export function sweepPolicy(source: Env = env()): SweepPolicy & { windowSource: string } {
  const override = source.BOUNDED_RESERVE_SWEEP_WINDOW_S;
  return override === undefined
    ? { ...SWEEP_POLICY, windowSource: "the default" }
    : {
        ...SWEEP_POLICY,
        windowMs: Math.round(override * 1000),
        windowSource: `BOUNDED_RESERVE_SWEEP_WINDOW_S=${override}`,
      };
}

/**
 * Refuses an unsafe reservation policy: workers call it at start-up (next to `validateBudgets`)
 * and do not start on the one-line error, which names the window and the worst case.
 */
export function validateReservationPolicy(source: Env = env(), policy = GENERATION_POLICY): void {
  const sweep = sweepPolicy(source);
  const budget = resolveBudgetUnchecked(KINDS.card_generation.queues[0], "card_generation", source);
  const problems = reservationProblems({
    policy,
    sweep,
    windowSource: sweep.windowSource,
    budgetSoftMs: budget.softMs,
  });
  if (problems.length > 0)
    throw new ReservationPolicyError(`Unsafe reservation policy, refusing to start: ${problems.join("; ")}.`);
}

/** Real time a reserve's window never goes under, whatever the time scale. */
const MIN_WINDOW_MS = 10_000;
/** Real time between heartbeats never goes under this (a busy loop otherwise). */
const MIN_HEARTBEAT_MS = 100;

/**
 * The sweeper's and the heartbeat's real-time durations in this process (scaled). At small time
 * scales a generation's real duration is dominated by database and HTTP round trips, which do
 * not shrink with the scale, so the window and the lease have floors too: the window at
 * `MIN_WINDOW_MS`, the lease at four real heartbeats. At scale 1 the floors never apply.
 */
export function reserveTimings(source: Env = env()) {
  const sweep = sweepPolicy(source);
  const scale = source.BOUNDED_TIME_SCALE;
  const heartbeatMs = Math.max(scaled(sweep.heartbeatMs, scale), MIN_HEARTBEAT_MS);
  return {
    windowMs: Math.max(scaled(sweep.windowMs, scale), MIN_WINDOW_MS),
    leaseMs: Math.max(scaled(sweep.leaseMs, scale), 4 * heartbeatMs),
    heartbeatMs,
    intervalMs: Math.max(scaled(sweep.intervalMs, scale), 500),
  };
}
