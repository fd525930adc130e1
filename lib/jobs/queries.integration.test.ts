import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { makeJob } from "@/test/helpers/jobs";
import { countJobsByStatus, RECENT_FINISHED_MS } from "./queries";

afterAll(async () => {
  await db().job.deleteMany({ where: { tenant: { slug: "t-overview-counts" } } });
  await closeDb();
});

describe("countJobsByStatus (the overview's counts)", () => {
  it("counts every job still open, and finished jobs only from the last 24 hours", async () => {
    const now = new Date();
    const before = await countJobsByStatus(now);
    const job = () => makeJob("t-overview-counts", { softMs: 600_000, hardMs: 900_000 });
    const [running, oldRunning, recentFailed, oldFailed] = [await job(), await job(), await job(), await job()];
    const longAgo = new Date(now.getTime() - RECENT_FINISHED_MS - 3_600_000);
    await db().job.update({ where: { id: running.id }, data: { status: "running" } });
    // Still running after two days: open jobs count whatever their age.
    await db().job.update({ where: { id: oldRunning.id }, data: { status: "running", createdAt: longAgo } });
    await db().job.update({ where: { id: recentFailed.id }, data: { status: "failed", finishedAt: new Date(now.getTime() - 3_600_000) } });
    await db().job.update({ where: { id: oldFailed.id }, data: { status: "failed", finishedAt: longAgo } });
    const after = await countJobsByStatus(now);
    expect(after.running - before.running).toBe(2);
    expect(after.failed - before.failed).toBe(1);
  });
});
