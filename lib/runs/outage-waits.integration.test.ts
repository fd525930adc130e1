import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { queue, closeQueues } from "@/lib/queues/queues";
import { breakerKey, cooldownRealMs, createBreaker } from "@/lib/ratelimit/breaker";
import { OutsideServiceDown } from "@/lib/ratelimit/errors";
import { closeRedis, redis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { outageWait, wakeWaitersOnRecovery, waitersKey } from "./outage-waits";

// A job that an outage keeps finding waits longer each time, and every waiting job is woken the
// moment the service answers again. Real Redis and a real BullMQ queue.

const down = (since: Date, waitMs = 5) =>
  new OutsideServiceDown("model", waitMs, since, "not answering", "the model service");
const q = queue("agent-batch");

beforeEach(async () => {
  await redis().del(waitersKey("model"), breakerKey("model"));
});

afterAll(async () => {
  await redis().del(waitersKey("model"), breakerKey("model"));
  await q.obliterate({ force: true });
  await closeQueues();
  await closeRedis();
});

describe("waiting for a service that is down", () => {
  it("waits one cool-down, then two, then four at most, while the same outage lasts; a new outage starts again at one", async () => {
    const cooldown = cooldownRealMs();
    const outage = new Date(Date.now() - 1_000);
    const waits = [];
    for (let i = 0; i < 5; i++) waits.push((await outageWait(down(outage), "job-a", "agent-batch")).waitMs);
    expect(waits).toEqual([1, 2, 4, 4, 4].map((n) => n * cooldown));
    // Another job of the same outage starts at one cool-down; so does this job in the next outage.
    expect((await outageWait(down(outage), "job-b", "agent-batch")).waitMs).toBe(cooldown);
    expect((await outageWait(down(new Date()), "job-a", "agent-batch")).waitMs).toBe(cooldown);
    // The breaker's own wait, when longer, stands.
    expect((await outageWait(down(new Date(), 50 * cooldown), "job-c", "agent-batch")).waitMs).toBe(50 * cooldown);
  });

  it("the probe that finds the service answering wakes every job noted as waiting for it, out of delayed at once", async () => {
    const ids = [`wake-${Date.now()}-1`, `wake-${Date.now()}-2`];
    for (const id of ids) {
      await q.add("agent_run", { jobId: id }, { jobId: id, delay: 3_600_000 });
      await outageWait(down(new Date()), id, "agent-batch");
    }
    expect(await Promise.all(ids.map(async (id) => (await q.getJob(id))!.getState()))).toEqual(["delayed", "delayed"]);

    const stop = wakeWaitersOnRecovery();
    try {
      // The model's breaker opened; after its cool-down one call is the probe, and it is answered.
      const breaker = createBreaker({ threshold: 1, windowMs: 10_000, cooldownMs: 20 });
      await breaker
        .guard("model", () => Promise.reject(Object.assign(new Error("refused"), { code: "ECONNREFUSED" })))
        .catch(() => undefined);
      await new Promise((r) => setTimeout(r, 30));
      await breaker.guard("model", () => Promise.resolve("answer"));
      await waitFor(
        async () =>
          (await Promise.all(ids.map(async (id) => (await q.getJob(id))!.getState()))).every((s) => s !== "delayed"),
        { timeoutMs: 5_000, intervalMs: 20, what: "the waiting jobs to be woken" },
      );
      expect(await redis().scard(waitersKey("model"))).toBe(0);
    } finally {
      stop();
    }
  });
});
