import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { itemLoopOnNewJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { forEachItem } from "./for-each-item";
import { groupedWrite } from "./commit";
import type { Prisma } from "@/lib/db/client";

const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(() => closeDb());

async function loopFor(total: number, concurrency: number) {
  const slug = uniqueTenantSlug("refused");
  tenants.push(slug);
  return itemLoopOnNewJob(slug, { total, concurrency });
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** The items' writes, each its own (`each`) or grouped in one `createMany` a commit (`grouped`, counting its calls). */
function writesOf(style: "each" | "grouped") {
  const calls: number[] = [];
  const grouped = groupedWrite(async (tx, data: Prisma.TransactionCreateManyInput[]) => {
    calls.push(data.length);
    await tx.transaction.createMany({ data });
  });
  const write = (data: Prisma.TransactionCreateManyInput) =>
    style === "grouped" ? grouped(data) : (tx: Prisma.TransactionClient) => tx.transaction.create({ data });
  return { write, calls };
}

describe("forEachItem: a write the database refuses fails that item alone", () => {
  it.each([
    [1, "each"],
    [8, "each"],
    [8, "grouped"],
  ] as const)(
    "a number out of range, a date out of range and a NUL byte fail their rows with a reason; the others commit (%i in flight, writes %s)",
    async (concurrency, style) => {
      const { id, tenantId, loop } = await loopFor(12, concurrency);
      const category = await db().category.findFirstOrThrow({ select: { id: true } });
      const { write } = writesOf(style);
      const summary = await forEachItem(loop, items(12), async (n) =>
        write({
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

describe("forEachItem: grouped writes", () => {
  it("the items of one commit are written by one call with all their data, each item once", async () => {
    const total = 200;
    const { id, tenantId, loop } = await loopFor(total, 50);
    const category = await db().category.findFirstOrThrow({ select: { id: true } });
    const { write, calls } = writesOf("grouped");
    const summary = await forEachItem(loop, items(total), async (n) => {
      // Items finish side by side, as the rows of one model call do.
      await new Promise((r) => setTimeout(r, 5));
      return write({
        tenantId,
        jobId: id,
        row: n,
        date: new Date("2026-01-05T00:00:00Z"),
        amountMinor: BigInt(-n * 100),
        currency: "EUR",
        counterparty: "REWE Markt",
        description: "",
        categoryId: category.id,
      });
    });
    expect(summary).toEqual({ processed: total, failed: 0 });
    // Every item's data went through a call, and most calls carried several items.
    expect(calls.reduce((a, b) => a + b, 0)).toBe(total);
    expect(calls.length).toBeLessThan(total / 4);
    const rows = await db().transaction.findMany({ where: { jobId: id }, select: { row: true } });
    expect(new Set(rows.map((r) => r.row)).size).toBe(total);
    expect(rows).toHaveLength(total);
  });
});
