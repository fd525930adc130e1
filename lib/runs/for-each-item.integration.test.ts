import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { RateLimitDefer } from "@/lib/ratelimit/errors";
import { DeadlineExceeded, ItemError, SliceEnded } from "@/lib/core/signals";
import { forEachItem, POISON_TRIES, type ItemLoop } from "./for-each-item";
import { poisonReason } from "./item-fault";
import { startAttempt } from "./attempt";

// These loops run on an attempt whose row nobody finalizes, so fencing cannot stop them: what
// ends them is forEachItem's own handling of the signal.
const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(() => closeDb());

function capturingLogger() {
  const lines: { level: number; msg: string; processed?: number; failed?: number }[] = [];
  const log = logger("test").child({});
  const spy = new Proxy(log, {
    get(target, prop) {
      if (prop === "warn" || prop === "info") {
        return (obj: object, msg: string) => lines.push({ level: prop === "warn" ? 40 : 30, msg, ...obj });
      }
      return Reflect.get(target, prop);
    },
  });
  return { log: spy, lines };
}

async function loopFor(total: number, signal: AbortSignal) {
  const slug = uniqueTenantSlug("loop");
  tenants.push(slug);
  const { id } = await makeJob(slug, { total, softMs: 600_000, hardMs: 900_000 });
  const run = (await startAttempt(id))!;
  const { log, lines } = capturingLogger();
  const loop: ItemLoop = { jobId: id, attempt: run.attempt, cursor: 0, signal, log };
  return { id, loop, lines };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe("forEachItem", () => {
  it("records an item's own error as that item's failure, and an error it repeats while the others go through as a poison item; goes on and logs processed=… failed=… at warn", async () => {
    const { id, loop, lines } = await loopFor(10, new AbortController().signal);
    const summary = await forEachItem(loop, items(10), async (n) => {
      if (n === 4) throw new ItemError("amount is zero");
      if (n === 7) throw new TypeError("boom");
      return null;
    });
    expect(summary).toEqual({ processed: 8, failed: 2 });
    const failures = await db().jobItemFailure.findMany({
      where: { jobId: id },
      orderBy: { row: "asc" },
      select: { row: true, reason: true },
    });
    expect(failures).toEqual([
      { row: 4, reason: "amount is zero" },
      { row: 7, reason: poisonReason(POISON_TRIES) },
    ]);
    expect(lines.filter((l) => l.msg.startsWith("processed="))).toEqual([
      { level: 40, msg: "processed=8 failed=2", processed: 8, failed: 2 },
    ]);
    expect((await db().job.findUniqueOrThrow({ where: { id } })).cursor).toBe(10);
  });

  it("re-checks the signal before every item: a handler that swallows the abort cannot keep the loop going", async () => {
    const controller = new AbortController();
    const { id, loop } = await loopFor(50, controller.signal);
    const handled: number[] = [];
    const reason = new DeadlineExceeded("x", 1);
    const run = forEachItem(loop, items(50), async (n, { signal }) => {
      handled.push(n);
      if (n === 5) controller.abort(reason);
      try {
        signal.throwIfAborted();
      } catch {
        // swallowed
      }
      return null;
    });
    await expect(run).rejects.toBe(reason);
    expect(handled).toEqual([1, 2, 3, 4, 5]);
    const row = await db().job.findUniqueOrThrow({ where: { id } });
    expect(row.processed).toBe(4);
  });

  it("never records the deadline as an item failure, even when a handler wraps it in another error", async () => {
    const controller = new AbortController();
    const { id, loop, lines } = await loopFor(10, controller.signal);
    const reason = new DeadlineExceeded("x", 1);
    const run = forEachItem(loop, items(10), async (n) => {
      if (n === 3) {
        controller.abort(reason);
        throw new Error("request failed", { cause: reason });
      }
      return null;
    });
    await expect(run).rejects.toBe(reason);
    expect(await db().jobItemFailure.count({ where: { jobId: id } })).toBe(0);
    expect(lines.at(-1)?.msg).toBe("processed=2 failed=0");
  });

  it("ends its slice: nothing new after the dispatch time, an item still going at the drain time is let go, and the rest is left for the next attempt", async () => {
    const { id, loop } = await loopFor(20, new AbortController().signal);
    const now = performance.now();
    const hung = new Promise<never>(() => undefined);
    const started: number[] = [];
    const run = forEachItem(
      { ...loop, concurrency: 4, slice: { dispatchUntil: now + 150, drainUntil: now + 400 } },
      items(20),
      async (n) => {
        started.push(n);
        // Item 9 never answers (a call stuck in the provider's tail); the others take 30 ms.
        if (n === 9) return hung;
        await new Promise((resolve) => setTimeout(resolve, 30));
        return null;
      },
    );
    const ended = await run.then(
      () => null,
      (err: unknown) => err,
    );
    expect(ended).toBeInstanceOf(SliceEnded);
    expect(started).toContain(9);
    expect(started.length).toBeLessThan(20);
    const row = await db().job.findUniqueOrThrow({ where: { id } });
    // Every item before the stuck one committed, the stuck one did not (nor failed), the rest were never sent.
    expect(row.failed).toBe(0);
    expect(row.cursor).toBe(8);
    expect(row.processed).toBe(started.length - 1);
    expect((ended as SliceEnded).committedThisRun).toBe(started.length - 1);
    expect(await db().jobItem.count({ where: { jobId: id, item: 9 } })).toBe(0);
  });

  it("a run past its slice's end that has committed nothing yet goes on until it has: a run that is not moving is left to its deadline", async () => {
    const { loop } = await loopFor(5, new AbortController().signal);
    const now = performance.now();
    const ended = await forEachItem(
      { ...loop, slice: { dispatchUntil: now - 1, drainUntil: now + 60_000 } },
      items(5),
      async () => null,
    ).then(
      () => null,
      (err: unknown) => err,
    );
    expect(ended).toBeInstanceOf(SliceEnded);
    expect((ended as SliceEnded).committedThisRun).toBe(1);
  });

  it("skips the items before the cursor", async () => {
    const { id, loop } = await loopFor(6, new AbortController().signal);
    const seen: number[] = [];
    await forEachItem({ ...loop, cursor: 4 }, items(6), async (n) => {
      seen.push(n);
      return null;
    });
    expect(seen).toEqual([5, 6]);
    expect((await db().job.findUniqueOrThrow({ where: { id } })).processed).toBe(2);
  });

  it("with items in flight, one item's long wait for a limit does not stop the job while others work: it waits its turn and goes on", async () => {
    const { id, loop } = await loopFor(8, new AbortController().signal);
    let deferred = 0;
    const summary = await forEachItem({ ...loop, concurrency: 4 }, items(8), async (n) => {
      if (n === 2 && deferred === 0) {
        deferred += 1;
        throw new RateLimitDefer(20, "provider:model");
      }
      await new Promise((r) => setTimeout(r, 30));
      return null;
    });
    expect(deferred).toBe(1);
    expect(summary).toEqual({ processed: 8, failed: 0 });
    expect(await db().job.findUniqueOrThrow({ where: { id }, select: { processed: true, cursor: true } })).toEqual({
      processed: 8,
      cursor: 8,
    });
  });

  it("when every item in flight waits for a limit, the deferral ends the loop (the job gives its slot back) and no item is a failure", async () => {
    const { id, loop } = await loopFor(8, new AbortController().signal);
    const run = forEachItem({ ...loop, concurrency: 4 }, items(8), async (n) => {
      if (n <= 2) return null;
      throw new RateLimitDefer(60_000, "provider:model");
    });
    await expect(run).rejects.toBeInstanceOf(RateLimitDefer);
    expect(await db().jobItemFailure.count({ where: { jobId: id } })).toBe(0);
    expect((await db().job.findUniqueOrThrow({ where: { id } })).processed).toBe(2);
  });
});
