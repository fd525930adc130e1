import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";

// An import of one row run by the runtime as a worker runs it, whose soft deadline (60 s, 3 s real
// at time scale 0.05) comes while the model service accepts its one call and answers none. One
// call alone is never silence for the periodic check (it could be the long tail): only the
// deadline's own check, which waits for the job's call to pass the threshold (2 s real), can see it.
let h: Awaited<ReturnType<typeof startImportHarness>>;

beforeAll(async () => {
  vi.stubEnv("BOUNDED_TIME_SCALE", "0.05");
  h = await startImportHarness({ budgetSoftS: 60, budgetHardS: 200 });
  const { breakerKey } = await import("@/lib/ratelimit/breaker");
  const { silenceKeys } = await import("@/lib/ratelimit/silence");
  await h.m.redis.redis().del(...silenceKeys("model", breakerKey("model")));
});
afterAll(async () => {
  await h.close();
});

describe("a deadline that falls while the model service is silent", () => {
  it("is not the job's timeout: the run gives its slot back and waits for the service, the time lost is not charged to its budget, and it completes by itself once the service answers", async () => {
    const jobId = await h.importOf(1, "deadline-silent");
    const answering = h.server.listeners("request") as ((req: IncomingMessage, res: ServerResponse) => void)[];
    const held: ServerResponse[] = [];
    h.server.removeAllListeners("request");
    h.server.on("request", (_req: IncomingMessage, res: ServerResponse) => void held.push(res));

    const result = await h.run(jobId);
    expect((result as Error | undefined)?.name).toBe("OutsideServiceDown");
    const row = await h.m.db.db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: { status: true, failed: true, message: true, slotMsUsed: true },
    });
    expect(row.status).toBe("delayed");
    expect(row.failed).toBe(0);
    expect(row.message).toMatch(/^Waiting for the model service, down since .* \(not answering: /);
    expect(row.message).not.toMatch(/budget|timed out/i);
    // Its call hung from the moment it went out: only the time before that is charged to the
    // budget, not the 60 s (production) the run lasted.
    expect(row.slotMsUsed).toBeLessThan(45_000);
    const events = await h.m.db
      .db()
      .jobEvent.findMany({ where: { jobId }, orderBy: { at: "asc" }, select: { type: true, message: true } });
    expect(events.map((e) => e.type)).not.toContain("timed_out");
    expect(events.find((e) => e.type === "service_wait")?.message).toMatch(
      /^Waiting for the model service \(not answering: /,
    );

    for (const res of held) res.destroy();
    h.server.removeAllListeners("request");
    for (const listener of answering) h.server.on("request", listener);
    await h.runToEnd(jobId);
    const done = await h.m.db
      .db()
      .job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true, processed: true, failed: true } });
    expect(done).toEqual({ status: "completed", processed: 1, failed: 0 });
  }, 60_000);
});
