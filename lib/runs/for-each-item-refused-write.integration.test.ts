import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { forEachItem, type ItemLoop } from "./for-each-item";
import { startAttempt } from "./attempt";

const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(() => closeDb());

async function loopFor(total: number, concurrency: number) {
  const slug = uniqueTenantSlug("refused");
  tenants.push(slug);
  const { id, tenantId } = await makeJob(slug, { total, softMs: 600_000, hardMs: 900_000 });
  const run = (await startAttempt(id))!;
  const loop: ItemLoop = {
    jobId: id,
    attempt: run.attempt,
    cursor: 0,
    concurrency,
    signal: new AbortController().signal,
    log: logger("test"),
  };
  return { id, tenantId, loop };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe("forEachItem: a write the database refuses fails that item alone", () => {
  it.each([1, 8])(
    "a number out of range, a date out of range and a NUL byte fail their rows with a reason; the others commit (%i in flight)",
    async (concurrency) => {
      const { id, tenantId, loop } = await loopFor(12, concurrency);
      const category = await db().category.findFirstOrThrow({ select: { id: true } });
      const summary = await forEachItem(
        loop,
        items(12),
        async (n) => (tx) =>
          tx.transaction.create({
            data: {
              tenantId,
              jobId: id,
              row: n,
              // Values no validation stopped: the database is the last word.
              date: n === 5 ? new Date("0000-01-01T00:00:00Z") : new Date("2026-01-05T00:00:00Z"),
              amountMinor: n === 3 ? 10n ** 23n : BigInt(-n * 100),
              currency: "EUR",
              counterparty: n === 9 ? "nul \u0000 byte" : "REWE Markt",
              description: "",
              categoryId: category.id,
            },
          }),
      );
      expect(summary).toEqual({ processed: 9, failed: 3 });
      const failures = await db().jobItemFailure.findMany({
        where: { jobId: id },
        orderBy: { row: "asc" },
        select: { row: true, reason: true },
      });
      expect(failures.map((f) => f.row)).toEqual([3, 5, 9]);
      for (const f of failures) expect(f.reason).toMatch(/^could not be stored: /);
      expect(failures.map((f) => f.reason.split(": ")[1])).toEqual([
        "a number is out of the range the database can hold",
        "a date is out of the range the database can hold",
        "it contains characters the database cannot hold",
      ]);
      expect(await db().transaction.count({ where: { jobId: id } })).toBe(9);
      const job = await db().job.findUniqueOrThrow({
        where: { id },
        select: { processed: true, failed: true, cursor: true },
      });
      expect(job).toEqual({ processed: 9, failed: 3, cursor: 12 });
    },
  );
});
