import { scaled } from "@/lib/time";

/**
 * How deliveries are retried and timed, with the reason for each number. Production durations,
 * scaled by BOUNDED_TIME_SCALE like every other one.
 */
export const WEBHOOK_POLICY = {
  /** 5 tries over ~7.5 min (30 s, 1, 2, 4 min between them): a receiver's deploy or restart fits inside, a dead one is given up on the same day's page. */
  attempts: 5,
  /** The first retry's wait; each one after doubles it. */
  backoffMs: 30_000,
  /** One request's time limit: a receiver should answer at once and do its work later (as Stripe and GitHub ask, 10 s). */
  timeoutMs: 10_000,
  /** How often the relay moves new outbox rows to the queue (at most this late, at the relay's own pace). */
  relayIntervalMs: 1_000,
  /** A pending delivery queued this long ago whose queue job is gone (Redis lost it) is queued again. */
  requeueAfterMs: 15 * 60_000,
} as const;

/** What a worker uses: the policy scaled, with real-time floors where a network needs them. */
export interface DeliverySettings {
  attempts: number;
  backoffMs: number;
  timeoutMs: number;
  relayIntervalMs: number;
  requeueAfterMs: number;
}

export function deliverySettings(scale?: number): DeliverySettings {
  return {
    attempts: WEBHOOK_POLICY.attempts,
    backoffMs: scaled(WEBHOOK_POLICY.backoffMs, scale),
    // An HTTP round trip has a real cost no time scale shrinks: never under 2 s.
    timeoutMs: Math.max(scaled(WEBHOOK_POLICY.timeoutMs, scale), 2_000),
    relayIntervalMs: Math.max(scaled(WEBHOOK_POLICY.relayIntervalMs, scale), 50),
    requeueAfterMs: Math.max(scaled(WEBHOOK_POLICY.requeueAfterMs, scale), 60_000),
  };
}

/** The wait before the retry after attempt `attempt` (1-based): BullMQ's exponential backoff, which schedules it. */
export function retryDelayMs(attempt: number, backoffMs: number): number {
  return Math.round(2 ** (attempt - 1) * backoffMs);
}
