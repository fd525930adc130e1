import { describe, expect, it } from "vitest";
import { isControlSignal } from "@/lib/core/signals";
import { BUCKETS, FAMILIES, bucketRate, parseScope, scopeOf, toProductionMs } from "./buckets";
import { RateLimitCapExceeded, RateLimitDefer } from "./errors";

describe("bucket specs and scopes", () => {
  it("statistics allows one request per 60 s window; every family says why", () => {
    expect(BUCKETS.statistics).toMatchObject({ capacity: 1, refillPerWindow: 1, windowMs: 60_000 });
    expect(FAMILIES).toEqual(["statistics", "orders", "ads"]);
    for (const family of FAMILIES) expect(BUCKETS[family].why.length).toBeGreaterThan(20);
  });

  it("a scope is family:tenant and parses back; anything else is not a scope", () => {
    expect(scopeOf("orders", "acme-42")).toBe("orders:acme-42");
    expect(parseScope("orders:acme-42")).toEqual({ family: "orders", tenant: "acme-42", spec: BUCKETS.orders });
    expect(parseScope("refunds:acme")).toBeNull();
    expect(parseScope("orders")).toBeNull();
    expect(parseScope("orders:")).toBeNull();
    expect(parseScope("orders:a}b")).toBeNull();
    expect(() => scopeOf("orders", "a:b")).toThrow(RangeError);
  });

  it("windows are time-scaled; the margin is added in real ms to each token's interval", () => {
    expect(bucketRate(BUCKETS.orders, 1)).toEqual({ capacity: 10, refillPerMs: 1 / 6_000, tokenIntervalMs: 6_000 });
    expect(bucketRate(BUCKETS.statistics, 0.001).tokenIntervalMs).toBe(60);
    expect(bucketRate(BUCKETS.statistics, 0.001, 25).tokenIntervalMs).toBe(85);
    // A scale so small that a window rounds to 0 ms still refills (1 ms per window).
    expect(bucketRate(BUCKETS.ads, 1e-6).refillPerMs).toBe(5);
    expect(toProductionMs(85, 0.001)).toBe(85_000);
  });
});

describe("limiter errors", () => {
  it("RateLimitDefer is a control signal, never an item failure", () => {
    const defer = new RateLimitDefer(1_234, "statistics:acme");
    expect(defer).toMatchObject({ name: "RateLimitDefer", waitMs: 1_234, scope: "statistics:acme" });
    expect(isControlSignal(defer)).toBe(true);
    expect(isControlSignal(new RateLimitCapExceeded(1, "statistics:acme"))).toBe(false);
  });

  it("RateLimitCapExceeded rounds Retry-After up to whole seconds, at least 1", () => {
    expect(new RateLimitCapExceeded(58_001, "statistics:acme")).toMatchObject({
      name: "RateLimitCapExceeded",
      waitMs: 58_001,
      retryAfterSeconds: 59,
    });
    expect(new RateLimitCapExceeded(3, "ads:acme").retryAfterSeconds).toBe(1);
  });
});
