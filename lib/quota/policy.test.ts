import { describe, expect, it } from "vitest";
import { parseEnv } from "@/lib/env";
import {
  GENERATION_POLICY,
  PROVIDER_POLL,
  QA_CHECK,
  REGENERATION,
  reservationProblems,
  SWEEP_POLICY,
  worstCaseMs,
  worstCaseTerms,
  type GenerationPolicy,
} from "@/lib/catalog/generation-policy";
import { sweepPolicy, validateReservationPolicy } from "./settings";

describe("the worst case of a generation is computed from the constants the generation uses", () => {
  it("is 16 min for the defaults: 2 × (2 × 150 s poll + 2 × 60 s download) + 1 × 2 × 45 s QA + 30 s writes", () => {
    expect(worstCaseMs()).toBe(960_000);
    expect(worstCaseTerms().map((t) => [t.name, t.totalMs])).toEqual([
      ["provider poll", 600_000],
      ["download", 240_000],
      ["QA check", 90_000],
      ["writes", 30_000],
    ]);
  });

  it("grows with every constant: a third pass adds a poll, a download and a QA check", () => {
    const third: GenerationPolicy = { ...GENERATION_POLICY, passes: REGENERATION.passes + 1 };
    expect(worstCaseMs(third)).toBe(960_000 + 300_000 + 120_000 + 90_000);
    expect(worstCaseMs({ ...GENERATION_POLICY, poll: { ...PROVIDER_POLL, attemptTimeoutMs: 200_000 } })).toBe(
      960_000 + 2 * 2 * 50_000,
    );
  });
});

describe("the sweep window must be at least the worst case × margin", () => {
  it("holds for the defaults: 25 min ≥ 960 s × 1.5 = 1,440 s", () => {
    expect(SWEEP_POLICY.windowMs).toBeGreaterThanOrEqual(worstCaseMs() * SWEEP_POLICY.margin);
    expect(reservationProblems({})).toEqual([]);
    expect(() => validateReservationPolicy(parseEnv({}))).not.toThrow();
  });

  it("refuses the 15-minute window of the incident, naming both numbers", () => {
    const problems = reservationProblems({ sweep: { ...SWEEP_POLICY, windowMs: 15 * 60_000 } });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("sweep window 900 s");
    expect(problems[0]).toContain("worst case of a generation 960 s × margin 1.5 = 1440 s");
  });

  it("fails when a constant grows (a third QA pass), with the window left as it is", () => {
    const third: GenerationPolicy = { ...GENERATION_POLICY, passes: REGENERATION.passes + 1 };
    expect(reservationProblems({ policy: third })[0]).toContain(
      "sweep window 1500 s (the default) is shorter than the worst case of a generation 1470 s × margin 1.5 = 2205 s",
    );
    const slowerQa: GenerationPolicy = { ...GENERATION_POLICY, qa: { ...QA_CHECK, attempts: QA_CHECK.attempts + 1 } };
    expect(reservationProblems({ policy: slowerQa })).toHaveLength(1);
    expect(() => validateReservationPolicy(parseEnv({}), third)).toThrow(
      /refusing to start: the reserve sweep window 1500 s .* 1470 s × margin 1.5 = 2205 s/,
    );
  });

  it("stops the workers for a window set too short in the environment, naming the variable", () => {
    expect(sweepPolicy(parseEnv({ BOUNDED_RESERVE_SWEEP_WINDOW_S: "1800" })).windowMs).toBe(1_800_000);
    expect(() => validateReservationPolicy(parseEnv({ BOUNDED_RESERVE_SWEEP_WINDOW_S: "900" }))).toThrow(
      "Unsafe reservation policy, refusing to start: the reserve sweep window 900 s (BOUNDED_RESERVE_SWEEP_WINDOW_S=900) is shorter than the worst case of a generation 960 s × margin 1.5 = 1440 s",
    );
  });

  it("refuses a generations budget shorter than the worst case, and a lease of fewer than three heartbeats", () => {
    expect(() =>
      validateReservationPolicy(
        parseEnv({ BOUNDED_BUDGET_GENERATIONS_SOFT_S: "600", BOUNDED_BUDGET_GENERATIONS_HARD_S: "900" }),
      ),
    ).toThrow(/soft budget of card_generation 600 s is shorter than the worst case of a generation 960 s/);
    expect(reservationProblems({ sweep: { ...SWEEP_POLICY, leaseMs: 2 * SWEEP_POLICY.heartbeatMs } })[0]).toContain(
      "under three heartbeats",
    );
  });
});

describe("real-time reserve timings", () => {
  it("are the policy scaled at scale 1, with floors at small scales where round trips do not shrink", async () => {
    const { reserveTimings } = await import("./settings");
    expect(reserveTimings(parseEnv({}))).toEqual({
      windowMs: 1_500_000,
      leaseMs: 120_000,
      heartbeatMs: 30_000,
      intervalMs: 60_000,
    });
    expect(reserveTimings(parseEnv({ BOUNDED_TIME_SCALE: "0.0005" }))).toEqual({
      windowMs: 10_000,
      leaseMs: 400,
      heartbeatMs: 100,
      intervalMs: 500,
    });
  });
});
