import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { waitFor } from "@/test/helpers/wait";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { OutsideServiceDown } from "@/lib/ratelimit/errors";
import { redis } from "@/lib/redis/client";
import { OcrError, ocrDocument } from "./ocr-client";
import { samplePdf, sampleText, truncatedPdf } from "./sample-documents";

/** Every ModelCall row this file writes carries this queue name, and only these rows are read. */
const queue = `ocr-test-${randomUUID()}`;

class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

const sims: RunningSimulators[] = [];
async function simulator(ocr: { errorRate: number; latencyMs?: () => number }): Promise<string> {
  const started = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 0.001 },
    ocr: { timeScale: 0.001, ...ocr },
  });
  sims.push(started);
  return started.url;
}

async function recorded(jobKind: string) {
  await flushModelCallRecords();
  return db().modelCall.findMany({
    where: { queue, jobKind },
    select: { type: true, model: true, outcome: true, error: true },
    orderBy: { id: "asc" },
  });
}

let fast: string;
beforeAll(async () => {
  fast = await simulator({ errorRate: 0 });
});

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await flushModelCallRecords();
  await db().modelCall.deleteMany({ where: { queue } });
  await closeDb();
});

const never = () => new AbortController().signal;

describe("ocrDocument against the OCR simulator", () => {
  it("returns the text and page count, recording one ok call of type ocr", async () => {
    const result = await ocrDocument({
      bytes: samplePdf(["Page one", "Page two"]),
      signal: never(),
      context: { queue, jobKind: "ok" },
      baseUrl: fast,
    });
    expect(result).toMatchObject({ text: "Page one\nPage two", pages: 2, attempts: 1 });
    expect(await recorded("ok")).toEqual([{ type: "ocr", model: "ocr", outcome: "ok", error: null }]);
  });

  it("an unreadable document is an OcrError with the service's reason, not retried", async () => {
    const error = await ocrDocument({
      bytes: truncatedPdf(),
      signal: never(),
      context: { queue, jobKind: "unreadable" },
      baseUrl: fast,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OcrError);
    expect((error as OcrError).message).toBe("the PDF is damaged (it ends before its end-of-file marker)");
    expect((error as OcrError).details).toMatchObject({ status: 422, attempts: 1, retryable: false });
    expect(await recorded("unreadable")).toEqual([
      {
        type: "ocr",
        model: "ocr",
        outcome: "error",
        error: "the PDF is damaged (it ends before its end-of-file marker)",
      },
    ]);
    // A refusal is about the document, not the service: however many, the breaker stays closed.
    for (let i = 0; i < 4; i++)
      await ocrDocument({
        bytes: truncatedPdf(),
        signal: never(),
        context: { queue, jobKind: "unreadable" },
        baseUrl: fast,
      }).catch(() => undefined);
    expect(await redis().hget(breakerKey("ocr"), "state")).toBeNull();
  });

  it("a failing service is retried, then it is down (its breaker opens: OutsideServiceDown, never a bad document); every attempt is recorded", async () => {
    const failing = await simulator({ errorRate: 1 });
    const error = await ocrDocument({
      bytes: sampleText(),
      signal: never(),
      context: { queue, jobKind: "failing" },
      baseUrl: failing,
      maxRetries: 2,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutsideServiceDown);
    expect(error).toMatchObject({ service: "ocr" });
    expect((await recorded("failing")).map((r) => r.outcome)).toEqual(["error", "error", "error"]);
    await redis().del(breakerKey("ocr"));
  });

  it("an abort rejects with the signal's reason itself (not wrapped), and the call is recorded as aborted", async () => {
    let reachedService = false;
    const slow = await simulator({
      errorRate: 0,
      latencyMs: () => {
        reachedService = true;
        return 1_000_000;
      },
    });
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit");
    const started = Date.now();
    const ocr = ocrDocument({
      bytes: sampleText(),
      signal: controller.signal,
      context: { queue, jobKind: "aborted" },
      baseUrl: slow,
    });
    // Aborted mid-call: once the service is working on the document (1,000 s, 1 s at this scale).
    await waitFor(() => reachedService, { timeoutMs: 10_000, what: "the OCR service to receive the document" });
    controller.abort(reason);
    await expect(ocr).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(900);
    expect(await recorded("aborted")).toEqual([
      { type: "ocr", model: "ocr", outcome: "aborted", error: "DeadlineProbe: soft limit" },
    ]);
    // An already aborted signal: no request at all.
    await expect(
      ocrDocument({
        bytes: sampleText(),
        signal: AbortSignal.abort(reason),
        context: { queue, jobKind: "pre-aborted" },
        baseUrl: slow,
      }),
    ).rejects.toBe(reason);
    expect(await recorded("pre-aborted")).toEqual([]);
  });
});

describe("POST /ocr refuses what it cannot take", () => {
  it("415 for a type it does not read, 400 for an empty body", async () => {
    const zip = await fetch(`${fast}/ocr`, { method: "POST", body: Uint8Array.from([0x50, 0x4b, 0x03, 0x04]) });
    expect(zip.status).toBe(415);
    expect((await zip.json()).error.type).toBe("unsupported_media_type");
    expect((await fetch(`${fast}/ocr`, { method: "POST", body: new Uint8Array(0) })).status).toBe(400);
  });
});
