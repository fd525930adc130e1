import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { estimateFinish, MIN_ITEMS_MEASURED, MIN_SPAN_MS, RATE_WINDOW_MS, type EstimatedJob } from "./progress-rate";
import { getProgress } from "@/lib/job-views/queries";
import type { JobStatus } from "@/lib/core/job-statuses";

// Jobs, parts and their committed items are written directly, each commit at a chosen moment
// before `now`: the estimate is a function of those moments, so nothing here waits for a clock.

const tenant = uniqueTenantSlug("progress-rate");
afterAll(async () => {
  await deleteTenant(tenant);
  await closeDb();
});

const SECOND = 1_000;
const scale = () => env().BOUNDED_TIME_SCALE;

interface JobShape {
  status?: JobStatus;
  total?: number | null;
  processed?: number;
  failed?: number;
  params?: Prisma.InputJsonValue;
  parentId?: string;
  createdAt?: Date;
  startedAt?: Date;
}

/** A Job row as the progress page reads it (a part when `parentId` is given). */
async function job(shape: JobShape = {}): Promise<EstimatedJob & { progressToken: string }> {
  const { id } = await makeJob(tenant, { total: shape.total ?? undefined, softMs: 600_000, hardMs: 900_000 });
  return db().job.update({
    where: { id },
    data: {
      status: shape.status ?? "running",
      total: shape.total === undefined ? 1_000 : shape.total,
      processed: shape.processed ?? 0,
      failed: shape.failed ?? 0,
      ...(shape.params !== undefined ? { params: shape.params } : {}),
      ...(shape.parentId ? { parentId: shape.parentId } : {}),
      ...(shape.createdAt ? { createdAt: shape.createdAt } : {}),
      startedAt: shape.startedAt ?? new Date(),
    },
    select: { id: true, status: true, total: true, processed: true, failed: true, params: true, progressToken: true },
  });
}

/** `count` items of `jobId` committed `every` ms apart, the last one `endsAgo` ms before `now`. */
async function commits(
  jobId: string,
  now: Date,
  opts: { count: number; every: number; endsAgo?: number; firstItem?: number },
): Promise<void> {
  const last = now.getTime() - (opts.endsAgo ?? 0);
  const first = opts.firstItem ?? 1;
  await db().jobItem.createMany({
    data: Array.from({ length: opts.count }, (_, i) => ({
      jobId,
      item: first + i,
      attempt: 1,
      ok: true,
      committedAt: new Date(last - (opts.count - 1 - i) * opts.every),
    })),
  });
}

describe("the measured rate (items committed in the last minute, counted from the first of them to now)", () => {
  it("counts the items its parts commit for the job, and none committed before the window", async () => {
    const now = new Date();
    const parent = await job({ total: 1_000, processed: 150 });
    // Before the window: the job's own items from before it was split, 2 to 1.5 min ago, at a very different pace.
    await commits(parent.id, now, { count: 50, every: 100, endsAgo: 90 * SECOND });
    // In the window: a finished part, then the part running now — one pace across both, 2 a second.
    const first = await job({ parentId: parent.id, status: "completed", total: 60 });
    const second = await job({ parentId: parent.id, status: "running", total: 60 });
    await commits(first.id, now, { count: 60, every: 500, endsAgo: 20 * SECOND });
    await commits(second.id, now, { count: 40, every: 500, endsAgo: 0 });

    const estimate = await estimateFinish(parent, now);
    // 100 commits 0.5 s apart: the first 49.5 s ago, 99 after it.
    expect(estimate.rate?.basis).toBe("measured");
    expect(estimate.rate?.perSecond).toBeCloseTo(99 / 49.5, 6);
  });

  it("the time left is the remaining items at that rate, plus the tail the job's projection names, once", async () => {
    const now = new Date();
    // 400 left; a projection whose pace the measurement overrides, and whose tail it keeps.
    const measured = await job({
      total: 1_000,
      processed: 590,
      failed: 10,
      params: { projection: { itemsPerSecond: 0.001, tailSeconds: 20_000, ms: 0 } },
    });
    await commits(measured.id, now, { count: 121, every: 250 });

    const estimate = await estimateFinish(measured, now);
    expect(estimate.rate).toEqual({ perSecond: 4, basis: "measured" });
    // 400 ÷ 4 = 100 s, and 20,000 production seconds of tail at this time scale.
    const tail = 20_000 * scale();
    expect(estimate.secondsLeft).toBeCloseTo(100 + tail, 6);
    expect(estimate.finishAt?.getTime()).toBe(now.getTime() + Math.round((100 + tail) * 1000));

    const progress = await getProgress(measured.progressToken, now);
    expect(progress).toMatchObject({
      rate: { perSecond: 4, basis: "measured" },
      etaSeconds: Math.round(100 + tail),
      expectedFinishAt: estimate.finishAt?.toISOString(),
    });
  });

  it("a job that waited an hour in the queue before its first item is not slowed by that wait", async () => {
    const now = new Date();
    const anHourAgo = new Date(now.getTime() - 3_600 * SECOND);
    const waited = await job({ total: 1_000, processed: 40, createdAt: anHourAgo, startedAt: anHourAgo });
    // Its first item 10 s ago, 4 a second since.
    await commits(waited.id, now, { count: 41, every: 250 });

    const progress = await getProgress(waited.progressToken, now);
    expect(progress?.rate).toEqual({ perSecond: 4, basis: "measured" });
    expect(progress?.etaSeconds).toBe(240); // 960 left ÷ 4
  });

  it("a job still filling its pipeline is measured by the later half of its life, so its slow first moments do not linger", async () => {
    const now = new Date();
    const ramping = await job({ total: 10_000 });
    // One a second from 40 s to 21 s ago while the first calls come back, then ten a second for the last 20 s.
    await commits(ramping.id, now, { count: 20, every: 1_000, endsAgo: 21 * SECOND });
    await commits(ramping.id, now, { count: 200, every: 100, firstItem: 21 });
    // Over the whole window it would be 219 ÷ 40 s ≈ 5.5 a second.
    expect((await estimateFinish(ramping, now)).rate?.perSecond).toBeCloseTo(199 / 19.9, 1);
  });

  it("a job that stopped committing shows it: the interval ends now, not at its last commit", async () => {
    const now = new Date();
    const stalled = await job({ total: 1_000 });
    // 41 items at 4 a second, from 40 s to 30 s ago; nothing in the 30 s since.
    await commits(stalled.id, now, { count: 41, every: 250, endsAgo: 30 * SECOND });
    expect((await estimateFinish(stalled, now)).rate?.perSecond).toBeCloseTo(40 / 40, 6);
  });
});

describe("no estimate from the rate unless the job is running", () => {
  it.each<JobStatus>(["queued", "delayed", "completed", "completed_with_errors", "timed_out", "failed"])(
    "%s: no rate, no time left",
    async (status) => {
      const now = new Date();
      const row = await job({
        status,
        total: 1_000,
        processed: 40,
        params: { projection: { itemsPerSecond: 1, tailSeconds: 10, ms: 0 } },
      });
      await commits(row.id, now, { count: 41, every: 250 });
      const progress = await getProgress(row.progressToken, now);
      expect(progress).toMatchObject({ rate: null, etaSeconds: null, expectedFinishAt: null });
    },
  );

  it("a split job whose running part waits in delayed for a rate-limit window has no time left either", async () => {
    const now = new Date();
    const parent = await job({ total: 1_000, processed: 40 });
    const part = await job({ parentId: parent.id, status: "delayed", total: 500 });
    await commits(part.id, now, { count: 41, every: 250 });
    expect(await getProgress(parent.progressToken, now)).toMatchObject({
      rate: null,
      etaSeconds: null,
      expectedFinishAt: null,
    });
  });
});

describe("before there is evidence, the job's projection stands in", () => {
  it("too few items: the projected rate, converted from production to real seconds, with its tail", async () => {
    const now = new Date();
    const early = await job({
      total: 1_000,
      processed: 5,
      params: { projection: { itemsPerSecond: 0.5, tailSeconds: 30, ms: 0 } },
    });
    await commits(early.id, now, { count: 5, every: 1_000 });

    const estimate = await estimateFinish(early, now);
    const perSecond = 0.5 / scale();
    expect(estimate.rate).toEqual({ perSecond, basis: "projected" });
    expect(estimate.secondsLeft).toBeCloseTo(995 / perSecond + 30 * scale(), 9);
  });

  it("a projection without a tail adds none; no projection, or one that is not valid, gives no estimate", async () => {
    const now = new Date();
    const noTail = await job({ total: 100, params: { projection: { itemsPerSecond: 0.1 } } });
    expect((await estimateFinish(noTail, now)).secondsLeft).toBeCloseTo(100 / (0.1 / scale()), 9);

    for (const params of [
      undefined,
      { part: { index: 1 } },
      { projection: { itemsPerSecond: "fast" } },
      { projection: { itemsPerSecond: 0 } },
      { projection: [1] },
    ]) {
      const row = await job({ total: 100, ...(params ? { params } : {}) });
      expect(await estimateFinish(row, now)).toEqual({ rate: null, secondsLeft: null, finishAt: null });
    }
  });

  it("a rate with no total, or with every item in, has no time left", async () => {
    const now = new Date();
    const noTotal = await job({ total: null });
    await commits(noTotal.id, now, { count: 41, every: 250 });
    expect(await estimateFinish(noTotal, now)).toMatchObject({
      rate: { perSecond: 4, basis: "measured" },
      secondsLeft: null,
      finishAt: null,
    });

    const allIn = await job({ total: 41, processed: 40, failed: 1 });
    await commits(allIn.id, now, { count: 41, every: 250 });
    expect(await estimateFinish(allIn, now)).toMatchObject({
      rate: { perSecond: 4, basis: "measured" },
      secondsLeft: null,
    });
  });
});

describe("what counts as evidence", () => {
  const cases: { rule: string; count: number; every: number; measured: boolean }[] = [
    {
      rule: `${MIN_ITEMS_MEASURED - 1} items are too few`,
      count: MIN_ITEMS_MEASURED - 1,
      every: 1_000,
      measured: false,
    },
    {
      rule: `${MIN_ITEMS_MEASURED} items over more than ${MIN_SPAN_MS} ms are enough`,
      count: MIN_ITEMS_MEASURED,
      every: 1_000,
      measured: true,
    },
    {
      rule: `commits exactly ${MIN_SPAN_MS} ms apart from first to last are enough`,
      count: 11,
      every: MIN_SPAN_MS / 10,
      measured: true,
    },
    {
      rule: `many items within less than ${MIN_SPAN_MS} ms are a burst, not a pace`,
      count: 200,
      every: 9,
      measured: false,
    },
    { rule: "a whole batch committed at one moment says nothing of a pace", count: 100, every: 0, measured: false },
  ];
  it.each(cases)("$rule", async ({ count, every, measured }) => {
    const now = new Date();
    const row = await job({ total: 10_000 });
    await commits(row.id, now, { count, every, endsAgo: 1_000 });
    const { rate } = await estimateFinish(row, now);
    expect(rate === null ? null : rate.basis).toBe(measured ? "measured" : null);
  });

  it(`items older than the window (${RATE_WINDOW_MS / 1000} s) are no evidence`, async () => {
    const now = new Date();
    const old = await job({ total: 10_000 });
    await commits(old.id, now, { count: 100, every: 100, endsAgo: RATE_WINDOW_MS + SECOND });
    expect((await estimateFinish(old, now)).rate).toBeNull();
  });
});
