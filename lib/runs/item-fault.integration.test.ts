import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db, type Prisma } from "@/lib/db/client";
import { itemLoopOnNewJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { AttemptFenced, DeadlineExceeded, ItemError, JobCancelled, WorkerShutdown } from "@/lib/core/signals";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { forEachItem, POISON_TRIES } from "./for-each-item";
import { poisonReason } from "./item-fault";

// The one rule at the commit boundary (lib/runs/item-fault.ts): a row is recorded as failed only
// for a fault of its own. Each case injects its error at the moment the row's outcome is written —
// inside the commit's transaction, from the row's effect — or as the row's handler ends.

const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(() => closeDb());

const ROWS = 6;
/** The row every case aims at. */
const AIMED = 3;

async function loopFor(controller = new AbortController(), concurrency = 1) {
  const slug = uniqueTenantSlug("fault");
  tenants.push(slug);
  const { id, loop } = await itemLoopOnNewJob(slug, { total: ROWS, concurrency, signal: controller.signal });
  return { id, loop, controller };
}

/** What the database holds for the job: rows committed (ok or failed) and the failures recorded. */
async function recorded(jobId: string) {
  const items = await db().jobItem.findMany({
    where: { jobId },
    select: { item: true, ok: true },
    orderBy: { item: "asc" },
  });
  const failures = await db().jobItemFailure.findMany({ where: { jobId }, select: { row: true, reason: true } });
  return { ok: items.filter((i) => i.ok).map((i) => i.item), failures };
}

const rows = Array.from({ length: ROWS }, (_, i) => i + 1);

/** An effect that throws `error()` inside the commit's transaction for the aimed row, `times` times. */
function throwingAtCommit(row: number, error: () => unknown, times = Infinity) {
  let thrown = 0;
  return async (n: number) =>
    n === row
      ? async (tx: Prisma.TransactionClient) => {
          await tx.$queryRaw`SELECT 1`;
          if (thrown++ < times) throw error();
        }
      : null;
}

/** A handler that throws `error()` as the aimed row's outcome is decided, `times` times. */
function throwingInHandler(row: number, error: () => unknown, times: number) {
  let thrown = 0;
  return async (n: number) => {
    if (n === row && thrown++ < times) throw error();
    return null;
  };
}

/** PostgreSQL's driver adapter, its connection cut in the middle of the transaction. */
const connectionCut = () =>
  Object.assign(new Error("Server has closed the connection."), {
    name: "DriverAdapterError",
    cause: { kind: "ConnectionClosed" },
  });
/** ioredis with its connection down past its retries. */
const redisAway = () =>
  Object.assign(new Error("Reached the max retries per request limit (which is 20)."), {
    name: "MaxRetriesPerRequestError",
  });
/** PostgreSQL refusing a transaction for a conflict with another: nothing to do with the row's values. */
const serializationFailure = () =>
  Object.assign(new Error("could not serialize access due to concurrent update"), {
    name: "DriverAdapterError",
    cause: { kind: "postgres", originalCode: "40001" },
  });

describe("a row is recorded as failed only for a fault of its own", () => {
  it("its input: a row that does not validate is failed with its reason, and the others are written", async () => {
    const { id, loop } = await loopFor();
    const summary = await forEachItem(loop, rows, async (n) => {
      if (n === AIMED) throw new ItemError("amount is zero");
      return null;
    });
    expect(summary).toEqual({ processed: ROWS - 1, failed: 1 });
    expect((await recorded(id)).failures).toEqual([{ row: AIMED, reason: "amount is zero" }]);
  });

  it("the provider's answer about the row: a model call refused for good (400) fails the row alone", async () => {
    const { id, loop } = await loopFor();
    const summary = await forEachItem(loop, rows, async (n) => {
      if (n === AIMED)
        throw new ModelCallError("context length exceeded", { status: 400, attempts: 1, retryable: false });
      return null;
    });
    expect(summary).toEqual({ processed: ROWS - 1, failed: 1 });
    expect((await recorded(id)).failures).toEqual([
      { row: AIMED, reason: "could not be processed: the model service refused it (HTTP 400)" },
    ]);
  });

  it("a value the database refuses, in the commit's own transaction, fails the row alone", async () => {
    const { id, loop } = await loopFor();
    const summary = await forEachItem(loop, rows, async (n) =>
      n === AIMED ? (tx: Prisma.TransactionClient) => tx.$executeRaw`SELECT ${10n ** 20n}::text::bigint` : null,
    );
    expect(summary).toEqual({ processed: ROWS - 1, failed: 1 });
    expect((await recorded(id)).failures).toEqual([
      { row: AIMED, reason: "could not be stored: a number is out of the range the database can hold" },
    ]);
  });

  it(`a poison row: an error it repeats ${POISON_TRIES} times at its commit while the other rows are written`, async () => {
    const { id, loop } = await loopFor(undefined, 2);
    const summary = await forEachItem(
      loop,
      rows,
      throwingAtCommit(AIMED, () => new TypeError("Cannot read properties of undefined")),
    );
    expect(summary).toEqual({ processed: ROWS - 1, failed: 1 });
    expect((await recorded(id)).failures).toEqual([{ row: AIMED, reason: poisonReason(POISON_TRIES) }]);
  });
});

describe("every other error leaves the row uncommitted (or redone), never failed", () => {
  it.each([
    ["the database's connection cut", "commit", connectionCut],
    ["the database's connection cut", "handler", connectionCut],
    ["Redis away", "commit", redisAway],
    ["Redis away", "handler", redisAway],
    ["a serialization failure (an error of nobody known, once)", "commit", serializationFailure],
    ["a serialization failure (an error of nobody known, once)", "handler", serializationFailure],
  ] as const)("%s at the %s: the row waits, is committed once, and nothing is failed", async (_, stage, error) => {
    const { id, loop } = await loopFor();
    const summary = await forEachItem(
      loop,
      rows,
      stage === "commit" ? throwingAtCommit(AIMED, error, 1) : throwingInHandler(AIMED, error, 1),
    );
    expect(summary).toEqual({ processed: ROWS, failed: 0 });
    const held = await recorded(id);
    expect(held.failures).toEqual([]);
    expect(held.ok).toEqual(rows);
  });

  it.each([
    ["a fence lost (a newer attempt owns the job)", (id: string) => new AttemptFenced(id, 1)],
    ["the worker shutting down", () => new WorkerShutdown("stopping")],
  ])("%s at the commit: the loop ends with it and the row is left for the resume", async (_, error) => {
    const { id, loop } = await loopFor();
    const err = error(id);
    await expect(
      forEachItem(
        loop,
        rows,
        throwingAtCommit(AIMED, () => err),
      ),
    ).rejects.toBe(err);
    const held = await recorded(id);
    expect(held.failures).toEqual([]);
    expect(held.ok).toEqual([1, 2]);
  });

  it.each([
    ["the deadline", (id: string) => new DeadlineExceeded(id, 1_000)],
    ["a cancel", (id: string) => new JobCancelled(id, "operator")],
  ])("%s arriving at the commit, as any error: the loop ends with it and the row is left", async (_, reasonOf) => {
    const { id, loop, controller } = await loopFor();
    const reason = reasonOf(id);
    const run = forEachItem(
      loop,
      rows,
      throwingAtCommit(AIMED, () => {
        controller.abort(reason);
        return new Error("statement cancelled", { cause: reason });
      }),
    );
    await expect(run).rejects.toBe(reason);
    const held = await recorded(id);
    expect(held.failures).toEqual([]);
    expect(held.ok).toEqual([1, 2]);
  });

  it("an error of nobody known that no other row got past ends the run: it may be the platform's, so the row is left", async () => {
    const { id, loop } = await loopFor();
    const err = serializationFailure();
    await expect(
      forEachItem(
        loop,
        rows,
        throwingAtCommit(1, () => err),
      ),
    ).rejects.toBe(err);
    const held = await recorded(id);
    expect(held.failures).toEqual([]);
    expect(held.ok).toEqual([]);
  });
});
