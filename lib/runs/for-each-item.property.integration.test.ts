import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { DeadlineExceeded, ItemError } from "@/lib/core/signals";
import { forEachItem, type ItemLoop } from "./for-each-item";
import { startAttempt } from "./attempt";

/**
 * Items in flight, finishing in a random order, under random crashes and a deadline at a random
 * moment, against the real database: whatever happens, every item's effect is committed exactly
 * once across all the runs, the counts on the row are the committed items, and nothing at or
 * below the cursor is missing. `npm run test:property` plays many more histories than `npm test`.
 */
const FULL = import.meta.env.MODE === "property";
const RUNS = FULL ? 200 : 15;

const tenants: string[] = [];
afterAll(async () => {
  for (const slug of tenants) await deleteTenant(slug);
  await closeDb();
});

/** One run of the loop's life: crashes after `crashAfter` commits, or a deadline after `deadlineAfter` handled items. */
interface RunPlan {
  crashAfter: number | null;
  deadlineAfter: number | null;
}

const historyArb = fc.record({
  items: fc.integer({ min: 1, max: 40 }),
  inFlight: fc.integer({ min: 1, max: 8 }),
  /** Per item: how long its handler takes (ms), and whether it is a bad item. */
  delays: fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 40, maxLength: 40 }),
  bad: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
  runs: fc.array(
    fc.record({
      crashAfter: fc.option(fc.integer({ min: 0, max: 30 }), { nil: null }),
      deadlineAfter: fc.option(fc.integer({ min: 0, max: 30 }), { nil: null }),
    }),
    { minLength: 0, maxLength: 4 },
  ),
});

const quiet = logger("test").child({ level: "silent" });

/**
 * Runs one attempt of the loop. A crash is a process that stops with items in flight: the run is
 * abandoned where it stands (its handlers never finish) and the next attempt fences whatever it
 * would still write. A deadline aborts the signal: nothing new is dispatched, in-flight items end.
 */
async function attempt(
  jobId: string,
  h: { delays: number[]; bad: boolean[] },
  inFlight: number,
  items: number,
  plan: RunPlan,
) {
  // The new attempt fences every write of the one before (a crashed run may still be committing).
  const run = (await startAttempt(jobId))!;
  await expectCountsAreCommits(jobId);
  const deadline = new AbortController();
  const loop: ItemLoop = {
    jobId,
    attempt: run.attempt,
    cursor: run.cursor,
    concurrency: inFlight,
    signal: deadline.signal,
    log: quiet,
    kind: "csv_import",
    queue: "imports",
  };
  let handled = 0;
  let dead = false;
  let committedHere = 0;
  let crashed!: () => void;
  const crash = new Promise<"crashed">((resolve) => (crashed = () => resolve("crashed")));
  const frozen = new Promise<never>(() => undefined);
  const looping = forEachItem(
    loop,
    Array.from({ length: items }, (_, i) => i + 1),
    async (n, { signal }) => {
      handled += 1;
      if (plan.deadlineAfter !== null && handled > plan.deadlineAfter) deadline.abort(new DeadlineExceeded(jobId, 1));
      // Out of order: each item takes its own time, and honours the signal as real calls do.
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, h.delays[n - 1]);
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(t);
            reject(signal.reason);
          },
          { once: true },
        );
      });
      if (dead || (plan.crashAfter !== null && committedHere >= plan.crashAfter)) {
        // The process is gone: nothing of this run goes on (what was mid-commit lands or is fenced).
        dead = true;
        crashed();
        return frozen;
      }
      if (h.bad[n - 1]) throw new ItemError(`bad item ${n}`);
      return async (tx) => {
        committedHere += 1;
        await tx.jobEvent.create({ data: { jobId, type: "effect", attempt: run.attempt, message: String(n) } });
      };
    },
  ).then(
    () => "done" as const,
    (err: unknown) => (err instanceof Error ? err.name : "error"),
  );
  return Promise.race([looping, crash]);
}

/** Whatever the runs before did: the row counts exactly what is committed, and the cursor is a true low watermark. */
async function expectCountsAreCommits(jobId: string) {
  const row = await db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: { processed: true, failed: true, cursor: true },
  });
  const committed = new Set(
    (await db().jobItem.findMany({ where: { jobId }, select: { item: true } })).map((c) => c.item),
  );
  expect(row.processed + row.failed).toBe(committed.size);
  for (let i = 1; i <= row.cursor; i++) expect(committed.has(i)).toBe(true);
}

describe("forEachItem with items in flight (property)", () => {
  it("across crashes, a deadline and resumes, every item is committed exactly once, the row's counts are the commits, and nothing below the cursor is missing", async () => {
    const slug = uniqueTenantSlug("inflight");
    tenants.push(slug);
    await fc.assert(
      fc.asyncProperty(historyArb, async (h) => {
        const { id } = await makeJob(slug, { total: h.items, softMs: 600_000, hardMs: 900_000 });
        for (const plan of h.runs) {
          if ((await attempt(id, h, h.inFlight, h.items, plan)) === "done") break;
        }
        // Finally a run with nothing going wrong finishes the job.
        expect(await attempt(id, h, h.inFlight, h.items, { crashAfter: null, deadlineAfter: null })).toBe("done");

        const row = await db().job.findUniqueOrThrow({
          where: { id },
          select: { processed: true, failed: true, cursor: true },
        });
        const bad = h.bad.slice(0, h.items).filter(Boolean).length;
        expect(row).toEqual({ processed: h.items - bad, failed: bad, cursor: h.items });
        const effects = await db().jobEvent.groupBy({
          by: ["message"],
          where: { jobId: id, type: "effect" },
          _count: { _all: true },
        });
        expect(effects.every((e) => e._count._all === 1)).toBe(true);
        expect(effects.map((e) => Number(e.message)).sort((a, b) => a - b)).toEqual(
          Array.from({ length: h.items }, (_, i) => i + 1).filter((n) => !h.bad[n - 1]),
        );
        const failures = await db().jobItemFailure.count({ where: { jobId: id } });
        expect(failures).toBe(bad);
      }),
      { numRuns: RUNS },
    );
  }, 300_000);
});
