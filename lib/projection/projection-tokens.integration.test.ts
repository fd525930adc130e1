import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { createProviderTokens, providerTokensKey } from "@/lib/ratelimit/provider-tokens";
import { closeRedis, redis } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { describeProjection, projectItems } from "./projection";

/** A csv_import job of `rows` rows whose upload holds `bytesPerRow` bytes a row. */
async function importOf(tenant: string, rows: number, bytesPerRow: number) {
  const job = await makeJob(tenant, { total: rows, softMs: 600_000, hardMs: 900_000 });
  const content = Buffer.alloc(rows * bytesPerRow, 120);
  await db().upload.create({
    data: { jobId: job.id, filename: "rows.csv", delimiter: ",", sizeBytes: content.byteLength, content },
  });
  return job;
}

const tenant = uniqueTenantSlug("projection-tokens");
const learnLimit = (limit: number) =>
  createProviderTokens().learn("model", { tokens: { tokens: { limit, remaining: limit, resetMs: 0 } } }, true);

beforeEach(async () => {
  await redis().del(providerTokensKey("model"));
});

afterAll(async () => {
  await redis().del(providerTokensKey("model"));
  await deleteTenant(tenant);
  await closeRedis();
  await closeDb();
});

describe("projection on the provider's tokens per minute", () => {
  it("a job is projected on tokens once the provider's token limit binds, and a file of long rows is projected slower than one of short rows", async () => {
    const short = await importOf(tenant, 2_000, 40);
    const long = await importOf(tenant, 2_000, 400);
    // No token limit known: calls and requests decide.
    const unlimited = (await projectItems("csv_import", 2_000, new Date(), { jobId: short.id }))!;
    expect(unlimited.limit).not.toBe("provider tokens per minute");

    // The provider announced 60 tokens a minute: far below what the calls allow, whatever this
    // database has measured of the kind's items so far.
    await learnLimit(60);
    const p = (await projectItems("csv_import", 2_000, new Date(), { jobId: short.id }))!;
    const q = (await projectItems("csv_import", 2_000, new Date(), { jobId: long.id }))!;
    expect(p.limit).toBe("provider tokens per minute");
    expect(q.limit).toBe("provider tokens per minute");
    expect(p.itemsPerSecond).toBeLessThan(unlimited.itemsPerSecond);
    // Ten times the bytes a row: more tokens a row in proportion (a very short row is counted as a
    // quarter of the measured ones at least: its batch's category list does not shrink with it).
    expect(p.itemsPerSecond / q.itemsPerSecond).toBeGreaterThan(2);
    expect(q.ms).toBeGreaterThan(p.ms);
    expect(describeProjection(q)).toContain("(provider tokens per minute)");
  });
});
