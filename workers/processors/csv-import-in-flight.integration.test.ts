import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";
import { distinctWord } from "@/lib/format/distinct-word";

/**
 * An import with its rows in flight (the catalog's number for csv_import) against the real
 * database, queue and model simulator: rows finish out of order and share batched model calls,
 * and still every row is committed exactly once, the counts are exact, and bad rows fail alone.
 */
let h: Awaited<ReturnType<typeof startImportHarness>>;
beforeAll(async () => {
  h = await startImportHarness();
});
afterAll(() => h.close());

const db = () => h.m.db.db();

describe("csv_import with rows in flight", () => {
  it("commits every row exactly once with exact counts while rows share batched model calls; a bad row fails alone and a partial batch answer is asked again singly", async () => {
    const rows = 300;
    const jobId = await h.importOf(rows, "inflight", (i) =>
      i % 50 === 0
        ? "2026-02-30,1.00,EUR,REWE Markt,impossible date"
        : i % 37 === 0
          ? `2026-03-01,-1.00,EUR,Uber BV,sim:omit row ${distinctWord(i)}`
          : null,
    );
    const catalog = await import("@/lib/catalog/catalog");
    expect(catalog.KINDS.csv_import.itemConcurrency.n).toBeGreaterThan(1);

    // A burst of slow answers on a loaded machine may open the model's breaker: the job then waits and goes on.
    await h.runToEnd(jobId);

    const bad = Math.floor(rows / 50);
    const job = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(job).toMatchObject({ status: "completed_with_errors", processed: rows - bad, failed: bad, cursor: rows });
    expect(await db().jobItem.count({ where: { jobId } })).toBe(rows);
    expect(await db().transaction.count({ where: { jobId } })).toBe(rows - bad);
    const dupes = await db().$queryRaw<
      { row: number }[]
    >`SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1`;
    expect(dupes).toEqual([]);
    expect(
      (await db().jobItemFailure.findMany({ where: { jobId }, select: { row: true } }))
        .map((f) => f.row)
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: bad }, (_, i) => (i + 1) * 50 + 1));

    // Rows share calls: far fewer calls than rows, and every good row was answered (the omitted ones singly, again).
    const calls = await db().modelCall.findMany({ where: { jobId, outcome: "ok" }, select: { batchSize: true } });
    const batched = calls.filter((c) => c.batchSize > 1);
    expect(batched.length).toBeGreaterThan(0);
    expect(calls.length).toBeLessThan((rows - bad) / 2);
    const omitted = Array.from({ length: rows }, (_, i) => i + 1).filter((i) => i % 37 === 0 && i % 50 !== 0).length;
    expect(calls.filter((c) => c.batchSize === 1).length).toBeGreaterThanOrEqual(omitted);
  });
});
