import { randomBytes } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { RETRY_PRIORITY } from "@/lib/queues/fairness";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { BULK_RETRY_CAP, previewBulkRetry, retryJobs } from "./bulk-retry";

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000002",
  username: "bulk-oncall",
  role: "operator",
  via: "token",
};
const tenants: string[] = [];

afterEach(async () => {
  await queue("imports").drain(true);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

async function jobsIn(status: "timed_out" | "completed" | "killed" | "cancelled", n: number, slug: string) {
  const tenantId = await ensureTenant(slug);
  await db().job.createMany({
    data: Array.from({ length: n }, () => ({
      kind: "csv_import",
      queue: "imports",
      tenantId,
      status,
      total: 10,
      cursor: 4,
      processed: 4,
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "default",
      progressToken: randomBytes(16).toString("hex"),
    })),
  });
}

describe("bulk retry by filter", () => {
  it("previews the count, then retries exactly the matching retryable jobs", async () => {
    const slug = uniqueTenantSlug("bulk");
    tenants.push(slug);
    await jobsIn("timed_out", 4, slug);
    await jobsIn("killed", 2, slug);
    await jobsIn("completed", 3, slug);

    expect(await previewBulkRetry({ tenant: slug })).toEqual({ count: 6, cap: BULK_RETRY_CAP, overCap: false });
    expect((await previewBulkRetry({ tenant: slug, status: "killed" })).count).toBe(2);

    const r = await retryJobs({ tenant: slug, status: "timed_out" }, operator);
    expect(r).toMatchObject({ type: "done", matched: 4, retried: 4, refused: [] });
    const statuses = await db().job.groupBy({ by: ["status"], where: { tenant: { slug } }, _count: { _all: true } });
    expect(Object.fromEntries(statuses.map((s) => [s.status, s._count._all]))).toEqual({
      queued: 4,
      killed: 2,
      completed: 3,
    });
    // Each back in the queue as a retry: ahead of every fresh job (lib/queues/fairness.ts).
    const retried = await db().job.findMany({ where: { tenant: { slug }, status: "queued" }, select: { id: true } });
    for (const { id } of retried) {
      const queued = await queue("imports").getJob(id);
      expect(queued?.priority).toBe(RETRY_PRIORITY);
      expect(await queued?.getState()).toBe("prioritized");
    }
  });

  it("leaves cancelled jobs out unless the filter names their status", async () => {
    const slug = uniqueTenantSlug("bulkcancel");
    tenants.push(slug);
    await jobsIn("timed_out", 2, slug);
    await jobsIn("cancelled", 3, slug);
    expect((await previewBulkRetry({ tenant: slug })).count).toBe(2);
    expect((await previewBulkRetry({ tenant: slug, status: "cancelled" })).count).toBe(3);
  });

  it(`refuses more than ${BULK_RETRY_CAP} jobs with a clear message, changing nothing`, async () => {
    const slug = uniqueTenantSlug("bulkcap");
    tenants.push(slug);
    await jobsIn("timed_out", BULK_RETRY_CAP + 1, slug);
    const r = await retryJobs({ tenant: slug }, operator);
    expect(r).toMatchObject({ type: "over_cap", count: BULK_RETRY_CAP + 1 });
    expect(r.message).toMatch(/^1,001 jobs match; a bulk retry takes at most 1,000\. Narrow the filter/);
    expect(await db().job.count({ where: { tenant: { slug }, status: "timed_out" } })).toBe(BULK_RETRY_CAP + 1);
  });
});
