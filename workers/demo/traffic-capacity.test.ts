import { describe, expect, it } from "vitest";
import { parseEnv } from "@/lib/env";
import { SAFETY_FACTOR, SPLITTABLE } from "@/lib/projection/projection";
import { KINDS } from "@/lib/catalog/catalog";
import { providerLimits } from "@/lib/ratelimit/buckets";
import { QUEUES } from "@/lib/catalog/catalog";
import { sampleModelLatencyMs } from "@/workers/simulators/model";
import { seeded } from "@/test/chaos/workload";
import { DEMO_ACTIONS, DEMO_IMPORT_SIZES, DEMO_INTERACTIVE_STEPS, DEMO_INTERVAL_MS, importSize } from "./traffic";

// The demo must keep up with itself: what its imports ask of the model provider, against what the
// provider allows at its defaults — the arithmetic, so a change to the mix that would make the
// queues grow fails here, not after an hour of `npm start`.
describe("the demo's imports against the model provider", () => {
  const env = parseEnv({});
  const { concurrency, rps } = providerLimits("model", env);
  const batch = KINDS.csv_import.modelBatch.size;
  const providerRowsPerSecond = Math.min((concurrency * batch * 1000) / SPLITTABLE.csv_import!.callMeanMs, rps * batch);
  const weights = DEMO_ACTIONS.reduce((s, a) => s + a.weight, 0);
  const importsPerSecond = (KINDS.csv_import.demo.weight / weights) * (1000 / DEMO_INTERVAL_MS);
  const meanRows = DEMO_IMPORT_SIZES.reduce((s, size) => s + size.share * ((size.rows[0] + size.rows[1]) / 2), 0);

  it("the shares add up and every roll picks a size", () => {
    expect(DEMO_IMPORT_SIZES.reduce((s, size) => s + size.share, 0)).toBeCloseTo(1, 10);
    expect(importSize(0).name).toBe("year");
    expect(importSize(0.999999).name).toBe("statement");
  });

  it("asks for at most 60 % of the provider's rows a second, leaving the rest to agents and documents", () => {
    const demand = importsPerSecond * meanRows;
    expect(providerRowsPerSecond).toBeCloseTo(20, 0);
    expect(demand / providerRowsPerSecond).toBeLessThanOrEqual(0.6);
  });

  it("its biggest import is more than one default budget's worth, so the demo shows a job splitting itself", () => {
    const year = DEMO_IMPORT_SIZES.find((s) => s.name === "year")!;
    expect(year.rows[0]).toBeGreaterThan(providerRowsPerSecond * 600 * SAFETY_FACTOR);
  });
});

// A healthy demo stays inside its own objective (99 % of a kind's jobs inside their soft budget):
// an interactive agent run waits for its model calls one after another, against a budget a person
// waits on, so the demo sends only runs short enough for that.
describe("the demo's interactive agent runs against their budget", () => {
  it("end inside the 60 s budget in at least 99 % of runs (the objective), with the model's own latency", () => {
    const budgetMs = QUEUES["agent-interactive"].budget.softMs;
    const random = seeded(20261206);
    const [lo, hi] = DEMO_INTERACTIVE_STEPS;
    const runs = 100_000;
    let late = 0;
    for (let r = 0; r < runs; r++) {
      const steps = lo + Math.floor(random() * (hi - lo + 1));
      let ms = 0;
      for (let s = 0; s < steps; s++) ms += sampleModelLatencyMs(random);
      // Tool calls and the commits between steps: a couple of seconds, generously.
      if (ms + 2_000 * steps > budgetMs) late += 1;
    }
    expect(late / runs).toBeLessThanOrEqual(0.01);
  });
});
