import { getEventListeners } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { forEachItem } from "@/lib/runs/for-each-item";
import { logger } from "@/lib/log";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { breakerKey, guardCall } from "@/lib/ratelimit/breaker";
import { currentDeadline, currentTenant } from "@/lib/ratelimit/context";
import { sendTracked, silenceKeys } from "@/lib/ratelimit/silence";
import { redis } from "@/lib/redis/client";
import { sleep } from "@/lib/time";
import { makeJob, queueJobFor } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { answeringService } from "@/test/helpers/answering-service";
import { waitFor } from "@/test/helpers/wait";
import type { Processor } from "./processor";
import { runJob } from "./run-job";

// The test time scale is 0.001: a budget of 200 000 ms (production) is 200 ms here.
// The hard limit sits far after the soft one, so a loaded machine cannot turn a timeout into a kill.
const SOFT_MS = 200_000;
const HARD_MS = 5_000_000;
const TIGHT_HARD_MS = 1_000_000;
const scale = () => env().BOUNDED_TIME_SCALE;
const log = logger("test");
const tenants: string[] = [];

async function job(total: number, budget = { softMs: SOFT_MS, hardMs: HARD_MS }) {
  const slug = uniqueTenantSlug("deadline");
  tenants.push(slug);
  return makeJob(slug, { total, ...budget });
}

const row = (id: string) =>
  db().job.findUniqueOrThrow({
    where: { id },
    select: {
      status: true,
      processed: true,
      failed: true,
      cursor: true,
      message: true,
      finishedAt: true,
      attemptStartedAt: true,
    },
  });

/** A chat completion that says "ok", as the model service answers one. */
function answerOk(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      id: "c1",
      object: "chat.completion",
      created: 0,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    }),
  );
}

const run = (processor: Processor, jobId: string) =>
  runJob({ csv_import: processor }, queueJobFor(jobId), new AbortController().signal, log);

/** One Transaction for item `index`: the effect whose presence proves a commit happened. */
const writeRow = (jobId: string, tenantId: string, index: number) => (tx: Prisma.TransactionClient) =>
  tx.transaction.create({
    data: {
      tenantId,
      jobId,
      row: index,
      date: new Date("2026-01-01T00:00:00Z"),
      amountMinor: 100n,
      currency: "EUR",
      counterparty: "x",
      description: "",
      categoryId: 13,
    },
  });

let hang: http.Server;
let hangUrl: string;

beforeAll(async () => {
  // A model endpoint that never answers: only the deadline can end a call to it.
  hang = http.createServer(() => undefined);
  await new Promise<void>((resolve) => hang.listen(0, "127.0.0.1", resolve));
  hangUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await flushModelCallRecords();
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  hang.closeAllConnections();
  await new Promise((resolve) => hang.close(resolve));
  await closeDb();
});

describe("soft limit", () => {
  it("a per-item helper that swallows the deadline does not keep the loop going: the job ends timed_out 'after i of n' and the deadline is no item's failure", async () => {
    // One second of real time: room for items to commit before the deadline even on a busy machine.
    const { id, tenantId } = await job(1000, { softMs: 1_000_000, hardMs: HARD_MS });
    let handledAfterDeadline = 0;
    const swallowing: Processor = async ({ loop, signal }) => {
      await forEachItem(
        // One item at a time: 1,000 items of 10 ms cannot all finish inside the second (with the
        // kind's 512 in flight, a quiet machine committed every one before the deadline).
        { ...loop, concurrency: 1 },
        Array.from({ length: 1000 }, (_, i) => i),
        async (_item, { index }) => {
          if (signal.aborted) handledAfterDeadline += 1;
          try {
            await sleep(10, signal);
          } catch {
            // the incident: a catch-all around the item's work
          }
          return writeRow(id, tenantId, index);
        },
      );
    };

    await expect(run(swallowing, id)).rejects.toThrow("soft limit reached");

    const r = await row(id);
    expect(r.status).toBe("timed_out");
    expect(r.failed).toBe(0);
    expect(r.processed).toBeGreaterThan(0);
    expect(r.processed).toBeLessThan(1000);
    expect(r.message).toBe(
      `Timed out after ${r.processed} of 1,000 rows (budget 1,000 s). Split the file or retry the remaining rows.`,
    );
    // The item in flight when the deadline came may have been handled; none after it.
    expect(handledAfterDeadline).toBeLessThanOrEqual(1);
    expect(await db().transaction.count({ where: { jobId: id } })).toBe(r.processed);
    expect(await db().jobItemFailure.count({ where: { jobId: id } })).toBe(0);
  });

  it("an in-flight model call the service is slow to answer (it answers other callers) is aborted at the soft limit and recorded as aborted; the row is terminal right after the deadline", async () => {
    const { id } = await job(1);
    // The model service answers everyone else meanwhile: this call is slow, the service is not silent.
    const stopAnswering = answeringService("model");
    let callError: unknown;
    let statusWhenAborted: string | undefined;
    const waitsOnModel: Processor = async ({ signal, run: r }) => {
      try {
        await chatCompletion({
          messages: [{ role: "user", content: "hi" }],
          signal,
          baseUrl: hangUrl,
          context: { queue: r.queue, jobKind: r.kind, jobId: r.jobId },
        });
      } catch (err) {
        callError = err;
        statusWhenAborted = (await row(r.jobId)).status;
        throw err;
      }
    };

    await expect(run(waitsOnModel, id)).rejects.toThrow("soft limit reached").finally(stopAnswering);

    expect((callError as Error).name).toBe("DeadlineExceeded");
    // The row was finalized before the signal reached the processor.
    expect(statusWhenAborted).toBe("timed_out");
    const r = await row(id);
    expect(r.status).toBe("timed_out");
    const deadline = r.attemptStartedAt!.getTime() + SOFT_MS * scale();
    expect(r.finishedAt!.getTime() - deadline).toBeGreaterThanOrEqual(0);
    await flushModelCallRecords();
    const calls = await db().modelCall.findMany({ where: { jobId: id }, select: { outcome: true } });
    expect(calls).toEqual([{ outcome: "aborted" }]);
  });
});

describe("soft limit while the service's verdict is awaited", () => {
  it("nothing new is dispatched while the verdict is awaited: items in flight go on, the job then times out as its own deadline", async () => {
    // Item 1's call is answered 700 ms after it went out (past the 200 ms soft limit, before the
    // 2 s silence threshold); the other items take 10 ms each, plenty of them left at the deadline.
    const slow = http.createServer((_req, res) => {
      setTimeout(() => {
        answerOk(res);
      }, 700);
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    try {
      const { id, tenantId } = await job(400);
      const dispatchedAt: number[] = [];
      const mixed: Processor = async ({ loop, signal, run: r }) => {
        await forEachItem(
          { ...loop, concurrency: 2 },
          Array.from({ length: 400 }, (_, i) => i),
          async (_item, { index }) => {
            dispatchedAt.push(Date.now());
            if (index === 1) {
              await chatCompletion({
                messages: [{ role: "user", content: "hi" }],
                signal,
                baseUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`,
                context: { queue: r.queue, jobKind: r.kind, jobId: r.jobId },
              });
            } else {
              await sleep(10, signal);
            }
            return writeRow(id, tenantId, index);
          },
        );
      };
      await expect(run(mixed, id)).rejects.toThrow("soft limit reached");
      const r = await row(id);
      expect(r.status).toBe("timed_out");
      const deadline = r.attemptStartedAt!.getTime() + SOFT_MS * scale();
      // At most the one dispatch that raced the timer: none in the 500 ms the verdict took.
      expect(dispatchedAt.filter((at) => at > deadline + 50).length).toBe(0);
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  it("a run whose last call is answered while its deadline waits for the silence verdict ends as it ended (completed), never timed_out afterwards", async () => {
    // The run's one call is answered 150 ms after its 1.6 s soft limit (counted, as the run counts
    // it, from the row's attempt start), and before the 2 s silence threshold counted from when the
    // call went out: so the call has 1.6 s to go out on a loaded machine, and the answer comes at
    // least 250 ms before the threshold whenever it went out. The service answers nothing else
    // meanwhile (so it is not judged at once).
    const SOFT_REAL_MS = 1_600;
    let jobId = "";
    const slow = http.createServer((_req, res) => {
      void db()
        .job.findUniqueOrThrow({ where: { id: jobId }, select: { attemptStartedAt: true } })
        .then(({ attemptStartedAt }) => {
          const answerAt = attemptStartedAt!.getTime() + SOFT_REAL_MS + 150;
          setTimeout(() => {
            answerOk(res);
          }, answerAt - Date.now());
        });
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    try {
      ({ id: jobId } = await job(1, { softMs: Math.round(SOFT_REAL_MS / scale()), hardMs: HARD_MS }));
      const oneCall: Processor = async ({ signal, run: r }) => {
        await chatCompletion({
          messages: [{ role: "user", content: "hi" }],
          signal,
          baseUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`,
          context: { queue: r.queue, jobKind: r.kind, jobId: r.jobId },
        });
        return { message: "done" };
      };
      await run(oneCall, jobId);
      expect((await row(jobId)).status).toBe("completed");
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});

describe("soft limit when the service froze after answering later calls", () => {
  it("is no long tail once the service answered nothing for its threshold: the verdict waits for the calls sent since, and the run waits for the service instead of timing out", async () => {
    // Soft limit 2.6 s here: 2.3 s after the service's last answer, past the 2 s threshold, and
    // before the calls sent to it after that answer have waited the threshold (at 3 s).
    await deadlineInAFreeze(2_600_000);
  });

  it("is no long tail when the deadline falls in the freeze before the threshold: the run waits for the service instead of timing out", async () => {
    // Soft limit 1.5 s here: 1.2 s after the service's last answer, before its 2 s threshold; the
    // calls sent to it since (at 1 s) are judged at 3 s, and the run waits that long for the verdict.
    await deadlineInAFreeze(1_500_000);
  });

  /**
   * A job's call is out; other callers' calls are answered for 300 ms, then the service freezes;
   * 700 ms later two more calls go out, and the job's soft limit (`softMs`) falls during the freeze.
   */
  async function deadlineInAFreeze(softMs: number) {
    const keys = silenceKeys("model", breakerKey("model"));
    await redis().del(...keys);
    const { id } = await job(1, { softMs, hardMs: 20_000_000 });
    const frozen: Promise<unknown>[] = [];
    const otherCaller = () =>
      guardCall("model", () =>
        sendTracked(
          "test: another caller of the frozen model service",
          (outage) => new Promise((_, reject) => outage?.addEventListener("abort", () => reject(outage.reason))),
          () => true,
        ),
      ).catch((err: unknown) => err);
    let callSent: () => void = () => undefined;
    const sent = new Promise<void>((resolve) => {
      callSent = resolve;
    });
    // Other callers (not the job's: started out of its run): once the job's call is out, their
    // calls are answered for 300 ms; then the service freezes, and 700 ms later two more go out.
    const others = (async () => {
      await sent;
      const stopAnswering = answeringService("model");
      await sleep(300);
      await stopAnswering();
      await sleep(700);
      frozen.push(otherCaller(), otherCaller());
    })();
    const waitsOnModel: Processor = async ({ signal, run: r }) => {
      const mine = chatCompletion({
        messages: [{ role: "user", content: "hi" }],
        signal,
        baseUrl: hangUrl,
        context: { queue: r.queue, jobKind: r.kind, jobId: r.jobId },
      });
      await sleep(20);
      callSent();
      await mine;
    };
    try {
      const result = await run(waitsOnModel, id).catch((err: unknown) => err);
      await others;
      expect((result as Error | undefined)?.name).toBe("OutsideServiceDown");
      const r = await row(id);
      expect(r.status).toBe("delayed");
      expect(r.message).toMatch(/^Waiting for the model service, down since .* \(not answering: /);
      for (const err of await Promise.all(frozen)) expect((err as Error).name).toBe("OutsideServiceDown");
    } finally {
      await redis().del(...keys);
    }
  }
});

describe("hard limit", () => {
  it("a processor that ignores its signal is stopped at the hard limit: the row is killed with its progress, the slot is freed, and nothing it writes afterwards is committed", async () => {
    const { id, tenantId } = await job(10_000, { softMs: SOFT_MS, hardMs: TIGHT_HARD_MS });
    let attemptedAfterHard = 0;
    let hardPassed = false;
    const ignoring: Processor = async ({ run: r }) => {
      // Never looks at its signal, swallows every error, never settles on its own.
      for (let i = r.cursor + 1; i <= 10_000; i++) {
        await sleep(5);
        if (hardPassed) attemptedAfterHard += 1;
        await db()
          .$transaction(async (tx) => {
            const { count } = await tx.job.updateMany({
              where: { id, attempt: r.attempt, status: "running" },
              data: { processed: { increment: 1 }, cursor: i },
            });
            if (count === 0) throw new Error("fenced");
            await writeRow(id, tenantId, i)(tx);
          })
          .catch(() => undefined);
      }
    };

    const started = Date.now();
    await expect(run(ignoring, id)).rejects.toThrow("hard limit reached");
    const settledAfter = Date.now() - started;
    hardPassed = true;
    const atHard = await row(id);
    expect(atHard.status).toBe("killed");
    expect(atHard.message).toMatch(
      new RegExp(`^Stopped at the hard limit after ${atHard.processed} of 10,000 rows \\(hard limit 1,000 s\\)`),
    );
    expect(settledAfter).toBeLessThan(TIGHT_HARD_MS * scale() * 4);

    // The abandoned run goes on trying; none of it lands.
    const committed = await db().transaction.count({ where: { jobId: id } });
    // An attempt is counted before its write, after the previous write settled: 7 counted, 6 tried.
    await waitFor(() => attemptedAfterHard > 6, { timeoutMs: 10_000, what: "the abandoned run to try more writes" });
    expect(attemptedAfterHard).toBeGreaterThan(5);
    expect(await db().transaction.count({ where: { jobId: id } })).toBe(committed);
    expect((await row(id)).processed).toBe(atHard.processed);
  });
});

describe("tenant context", () => {
  it("a processor runs as its job's tenant, across awaits: the provider slots it takes count against that tenant's fair share", async () => {
    const { id, tenantId } = await job(1);
    const seen: (string | undefined)[] = [];
    await run(async () => {
      seen.push(currentTenant());
      await sleep(1);
      seen.push(currentTenant());
    }, id);
    expect(seen).toEqual([tenantId, tenantId]);
    expect((await row(id)).status).toBe("completed");
    expect(currentTenant()).toBeUndefined();
  });

  it("a processor's calls know its soft deadline, so the provider's slots go first to the job with the least time left", async () => {
    const { id } = await job(1);
    let deadlineAt: number | undefined;
    const before = Date.now();
    await run(async () => {
      await sleep(1);
      deadlineAt = currentDeadline();
    }, id);
    const startedAt = (await row(id)).attemptStartedAt!.getTime();
    expect(startedAt).toBeGreaterThanOrEqual(before - 5);
    // The soft budget, time-scaled, from the attempt's start (nothing used before it).
    expect(deadlineAt).toBeGreaterThanOrEqual(startedAt + SOFT_MS * scale() - 5);
    expect(deadlineAt).toBeLessThanOrEqual(startedAt + SOFT_MS * scale() + 5);
    expect(currentDeadline()).toBeUndefined();
  });
});

describe("the process's shutdown signal", () => {
  it("follows any number of runs at once without a listener-leak warning, and none of theirs stays on it", async () => {
    const shutdown = new AbortController();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      // Budgets of a minute of real time: twelve runs starting on a busy machine are not timed.
      const jobs = await Promise.all(
        Array.from({ length: 12 }, () => job(1, { softMs: 60_000_000, hardMs: 120_000_000 })),
      );
      let started = 0;
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const runs = jobs.map(({ id }) =>
        runJob(
          {
            csv_import: async () => {
              started++;
              await gate;
            },
          },
          queueJobFor(id),
          shutdown.signal,
          log,
        ),
      );
      await waitFor(() => started === jobs.length, { what: "every run to have started", timeoutMs: 10_000 });
      release();
      await Promise.all(runs);
      // Node emits the warning on the next tick of the listener that crossed the limit.
      await sleep(10);
      expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
      expect(getEventListeners(shutdown.signal, "abort")).toEqual([]);
      for (const { id } of jobs) expect((await row(id)).status).toBe("completed");
    } finally {
      process.off("warning", onWarning);
    }
  });
});
