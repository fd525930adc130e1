import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { makeJob } from "@/test/helpers/jobs";
import { countJobsByStatus, listJobs, RECENT_FINISHED_MS } from "./queries";

afterAll(async () => {
  await db().job.deleteMany({ where: { tenant: { slug: { in: ["t-overview-counts", "t-list-pages"] } } } });
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
    await db().job.update({
      where: { id: recentFailed.id },
      data: { status: "failed", finishedAt: new Date(now.getTime() - 3_600_000) },
    });
    await db().job.update({ where: { id: oldFailed.id }, data: { status: "failed", finishedAt: longAgo } });
    const after = await countJobsByStatus(now);
    expect(after.running - before.running).toBe(2);
    expect(after.failed - before.failed).toBe(1);
  });
});

describe("listJobs pages (keyset on createdAt, id)", () => {
  it("walks every job once, newest first, across pages, even when jobs share a creation time", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await makeJob("t-list-pages", { softMs: 600_000, hardMs: 900_000 })).id);
    // Five of them created in the same millisecond: only the id orders them.
    const same = new Date("2026-11-30T12:00:00.000Z");
    await db().job.updateMany({ where: { id: { in: ids.slice(0, 5) } }, data: { createdAt: same } });
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const r = await listJobs({ tenant: "t-list-pages", limit: 2, after });
      seen.push(...r.jobs.map((j) => j.id));
      if (!r.nextAfter) break;
      after = r.nextAfter;
    }
    const expected = await db().job.findMany({
      where: { id: { in: ids } },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      select: { id: true },
    });
    expect(seen).toEqual(expected.map((j) => j.id));
  });
});
