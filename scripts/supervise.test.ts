import { describe, expect, it } from "vitest";
import { RESTART_POLICY, RestartTracker } from "./supervise";

const crash = { code: 1, signal: null };

/** Exits `n` times, each run lasting `upMs`, restarting after the delay it was given; the decisions. */
function exitRepeatedly(tracker: RestartTracker, n: number, upMs: number, from = 0) {
  let now = from;
  const decisions = [];
  for (let i = 0; i < n; i++) {
    tracker.started(now);
    now += upMs;
    const d = tracker.exited(crash, now);
    decisions.push(d);
    now += d.delayMs;
  }
  return { decisions, now };
}

describe("restart policy", () => {
  it("backs off exponentially from 1 s, doubling up to 30 s", () => {
    const { decisions } = exitRepeatedly(new RestartTracker("workers"), 8, 100);
    expect(decisions.map((d) => d.delayMs)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });

  it("starts again from 1 s after a minute of health", () => {
    const tracker = new RestartTracker("web");
    const { now } = exitRepeatedly(tracker, 4, 100);
    tracker.started(now);
    const afterHealthyMinute = tracker.exited(crash, now + RESTART_POLICY.healthyAfterMs);
    expect(afterHealthyMinute.delayMs).toBe(1_000);
    // Just short of a minute is not healthy: the backoff goes on.
    const other = new RestartTracker("web");
    const { now: later } = exitRepeatedly(other, 4, 100);
    other.started(later);
    expect(other.exited(crash, later + RESTART_POLICY.healthyAfterMs - 1).delayMs).toBe(16_000);
  });

  it("reports a crash loop at five exits within a minute, loudly each time, naming the part, how it ended and the next delay, and keeps retrying", () => {
    const tracker = new RestartTracker("workers");
    const { decisions } = exitRepeatedly(tracker, 4, 100);
    expect(decisions.every((d) => !d.crashLoop)).toBe(true);
    expect(decisions[0]!.line).toBe("bounded: workers exited (exit code 1, after 0.1 s up); restarting it in 1 s.");

    // The fifth exit within the minute (1 + 2 + 4 s of delays so far, plus the runs).
    tracker.started(8_000);
    const fifth = tracker.exited({ code: null, signal: "SIGKILL" }, 8_500);
    expect(fifth).toMatchObject({ crashLoop: true, recentExits: 5, delayMs: 16_000 });
    expect(fifth.line).toBe(
      "bounded: CRASH LOOP: workers exited 5 times in the last 60 s (this time: signal SIGKILL, after 0.5 s up). Restarting it in 16 s, and again after every exit with at most 30 s between tries; the other parts keep running. Its log above says why it exits.",
    );
    // Still in the loop: still reported, still retried, the delay capped.
    tracker.started(24_500);
    const sixth = tracker.exited(crash, 25_000);
    expect(sixth).toMatchObject({ crashLoop: true, recentExits: 6, delayMs: 30_000 });
  });

  it("exits spread over more than a minute are not a crash loop", () => {
    const tracker = new RestartTracker("sim");
    const { decisions } = exitRepeatedly(tracker, 6, 20_000);
    expect(decisions.map((d) => d.recentExits)).toEqual([1, 2, 3, 3, 3, 2]);
    expect(decisions.some((d) => d.crashLoop)).toBe(false);
  });
});
