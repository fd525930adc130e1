/**
 * The restart policy of `npm start` (scripts/start.ts), kept free of processes and timers so it
 * can be tested as arithmetic: when a part (web, workers, simulators) exits, how long to wait
 * before starting it again, and what to say.
 *
 * - Exponential backoff: 1 s after the first exit, doubling to at most 30 s, so a part that dies
 *   at start (a port taken, a database not yet up) is retried without spinning the machine.
 * - A part that stayed up for a minute was healthy: its next exit starts from 1 s again.
 * - Five exits within a minute are a crash loop: every exit says so loudly, naming the part, how
 *   it ended and the next delay — and the part keeps being retried at the capped delay. A crash
 *   loop is never fatal to the other parts: the web keeps answering (and says which part is
 *   missing) while the workers crash, and the other way round.
 */

export interface RestartPolicy {
  /** Delay before the first restart after an unhealthy run. */
  initialDelayMs: number;
  /** The backoff never waits longer than this. */
  maxDelayMs: number;
  /** A run at least this long was healthy: the backoff starts again from `initialDelayMs`. */
  healthyAfterMs: number;
  /** This many exits within `crashLoopWindowMs` are reported as a crash loop. */
  crashLoopExits: number;
  crashLoopWindowMs: number;
}

export const RESTART_POLICY: RestartPolicy = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  healthyAfterMs: 60_000,
  crashLoopExits: 5,
  crashLoopWindowMs: 60_000,
};

/** How a part's process ended (Node's `exit` event). */
export interface PartExit {
  code: number | null;
  signal: string | null;
}

export interface RestartDecision {
  /** Wait this long, then start the part again. */
  delayMs: number;
  /** Exits within the crash-loop window, this one included. */
  recentExits: number;
  crashLoop: boolean;
  /** The error line to print (every exit gets one). */
  line: string;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** One part's restart history: `started` at each start, `exited` at each exit. */
export class RestartTracker {
  private startedAt: number | null = null;
  /** Exits in a row that came before the part had been healthy. */
  private unhealthy = 0;
  private exits: number[] = [];

  constructor(
    readonly part: string,
    private readonly policy: RestartPolicy = RESTART_POLICY,
  ) {}

  started(now: number): void {
    this.startedAt = now;
  }

  exited(exit: PartExit, now: number): RestartDecision {
    const upMs = this.startedAt === null ? 0 : now - this.startedAt;
    if (upMs >= this.policy.healthyAfterMs) this.unhealthy = 0;
    this.unhealthy += 1;
    // The exponent is capped so a part that fails for days does not overflow the arithmetic.
    const delayMs = Math.min(
      this.policy.maxDelayMs,
      this.policy.initialDelayMs * 2 ** Math.min(this.unhealthy - 1, 30),
    );
    this.exits.push(now);
    this.exits = this.exits.filter((t) => t > now - this.policy.crashLoopWindowMs);
    const recentExits = this.exits.length;
    const crashLoop = recentExits >= this.policy.crashLoopExits;
    const how = exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code ?? "unknown"}`;
    const line = crashLoop
      ? `bounded: CRASH LOOP: ${this.part} exited ${recentExits} times in the last ${seconds(this.policy.crashLoopWindowMs)} (this time: ${how}, after ${seconds(upMs)} up). ` +
        `Restarting it in ${seconds(delayMs)}, and again after every exit with at most ${seconds(this.policy.maxDelayMs)} between tries; the other parts keep running. Its log above says why it exits.`
      : `bounded: ${this.part} exited (${how}, after ${seconds(upMs)} up); restarting it in ${seconds(delayMs)}.`;
    return { delayMs, recentExits, crashLoop, line };
  }
}
