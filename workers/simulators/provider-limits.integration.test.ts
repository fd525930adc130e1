import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { env } from "@/lib/env";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { runWithRateLimitDeferral } from "@/lib/ratelimit/context";
import { closeRedis } from "@/lib/redis/client";
import { createModelSimulator } from "./model";
import { createRouter } from "./router";

afterAll(async () => {
  await closeRedis();
});

describe("Bounded's provider limiter against the simulated model (real Redis)", () => {
  it("with the default limits on both sides, a burst of model calls from many items meets no 429", async () => {
    // The simulator's limits and the provider limits are the same variables' defaults: 32 in
    // flight, 30 a production second (30,000 a real second at the tests' time scale 0.001).
    expect(env().BOUNDED_SIM_MODEL_CONCURRENCY).toBe(env().BOUNDED_PROVIDER_MODEL_CONCURRENCY);
    expect(env().BOUNDED_SIM_MODEL_RPS).toBe(env().BOUNDED_PROVIDER_MODEL_RPS);
    const sim = createModelSimulator({ errorRate: 0, latencyMs: () => 30_000 });
    const server = http.createServer(createRouter(sim.routes));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    try {
      // Each call its own signal, as items in flight have; a deferral threshold beyond the whole
      // burst (300 calls of 30 ms, 32 at a time: ~0.3 s), so every wait is slept and every call made.
      const results = await runWithRateLimitDeferral(30_000, () =>
        Promise.all(
          Array.from({ length: 300 }, (_, i) =>
            chatCompletion({
              messages: [{ role: "user", content: `item ${i}` }],
              signal: new AbortController().signal,
              context: { queue: "imports", jobKind: "csv_import" },
              baseUrl,
              maxRetries: 0,
              record: async () => {},
            }),
          ),
        ),
      );
      expect(results.every((r) => r.attempts === 1)).toBe(true);
      const stats = (await (await fetch(`${baseUrl}/_stats`)).json()) as {
        admitted: number;
        rejected: { total: number };
      };
      expect(stats.admitted).toBe(300);
      expect(stats.rejected.total).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
