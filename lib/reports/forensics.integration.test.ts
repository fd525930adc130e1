import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { getJobForensics, type TimelineCall, type TimelineEvent } from "@/lib/reports/forensics";

const slug = uniqueTenantSlug("forensics");
const T0 = Date.parse("2026-11-20T10:00:00.000Z");
const at = (s: number) => new Date(T0 + s * 1000);

afterAll(async () => {
  await deleteTenant(slug);
  await closeDb();
});

async function job(parentId?: string, part?: { index: number; of: string }) {
  const j = await makeJob(slug, { softMs: 600_000, hardMs: 900_000 });
  if (parentId && part) {
    await db().job.update({
      where: { id: j.id },
      data: { parentId, params: { part: { of: part.of, index: part.index, count: 2, from: 0, to: 5 } } },
    });
  }
  await db().jobEvent.deleteMany({ where: { jobId: j.id } }); // the helper's "created" event is at now(); the test writes its own
  return j.id;
}

const event = (jobId: string, s: number, type: string, attempt: number, message = type) => ({
  jobId,
  at: at(s),
  type,
  attempt,
  message,
});
const call = (
  jobId: string,
  s: number,
  durationMs: number,
  outcome: "ok" | "error" | "aborted" | "superseded" = "ok",
  batchSize = 8,
  type: "model" | "tool" = "model",
) => ({
  jobId,
  startedAt: at(s),
  durationMs,
  outcome,
  batchSize,
  type,
  model: type === "tool" ? "lookup" : "sim-model",
  jobKind: "csv_import",
  queue: "imports",
  error: outcome === "error" ? "HTTP 500" : null,
});

describe("getJobForensics", () => {
  it("merges events and calls in time order, and sums up calls, reschedules, attempts and reaping", async () => {
    const id = await job();
    await db().jobEvent.createMany({
      data: [
        event(id, 0, "created", 0),
        event(id, 1, "started", 1),
        event(id, 20, "delayed", 1, "Waiting 47 s for provider:model"),
        event(id, 70, "started", 1),
        event(id, 200, "abandoned", 1, "Abandoned after 40 of 100 rows"),
        event(id, 300, "retry", 2),
        event(id, 301, "started", 2),
        event(id, 400, "completed", 2),
      ],
    });
    await db().modelCall.createMany({
      data: [
        call(id, 2, 5_000),
        call(id, 8, 900, "error", 8),
        call(id, 72, 12_000, "ok", 3),
        call(id, 302, 4_000),
        call(id, 303, 15, "ok", 1, "tool"),
      ],
    });
    const f = (await getJobForensics(id))!;
    const line = f.entries.map((e) =>
      e.kind === "event" ? `${e.type}:${e.category}` : e.kind === "call" ? `call:${e.durationMs}` : "earlier",
    );
    expect(line).toEqual([
      "created:event",
      "started:attempt",
      "call:5000",
      "call:900",
      "delayed:reschedule",
      "started:attempt",
      "call:12000",
      "abandoned:reaper",
      "retry:attempt",
      "started:attempt",
      "call:4000",
      "call:15",
      "completed:event",
    ]);
    const failed = f.entries.find((e): e is TimelineCall => e.kind === "call" && e.outcome === "error")!;
    expect(failed).toMatchObject({ batchSize: 8, error: "HTTP 500", model: "sim-model" });
    expect(f.calls).toEqual([
      // Items answered: the three answered calls' 8 + 3 + 8 rows, not the failed call's 8.
      { type: "model", calls: 4, errors: 1, aborted: 0, superseded: 0, p50Ms: 4_000, maxMs: 12_000, items: 19 },
      { type: "tool", calls: 1, errors: 0, aborted: 0, superseded: 0, p50Ms: 15, maxMs: 15, items: 1 },
    ]);
    expect(f).toMatchObject({ callsTotal: 5, callsShown: 5, reschedules: 1, attempts: 3, reaped: 1 });
  });

  it("counts a hedged request whose twin answered first as superseded, apart from the calls its job cut", async () => {
    const id = await job();
    await db().modelCall.createMany({
      data: [
        call(id, 1, 41_000, "superseded"),
        call(id, 2, 2_000),
        call(id, 3, 1_000, "aborted"),
        call(id, 4, 3_000, "superseded"),
      ],
    });
    const f = (await getJobForensics(id))!;
    expect(f.calls).toEqual([
      { type: "model", calls: 4, errors: 0, aborted: 1, superseded: 2, p50Ms: 2_000, maxMs: 41_000, items: 8 },
    ]);
  });

  it("shows only the latest calls of a job with many, and counts the earlier ones in one line", async () => {
    const id = await job();
    await db().jobEvent.createMany({ data: [event(id, 0, "started", 1), event(id, 1000, "timed_out", 1)] });
    // 30 calls, one a second; the 4th is an error.
    await db().modelCall.createMany({
      data: Array.from({ length: 30 }, (_, i) => call(id, 10 + i, 1_000 + i, i === 3 ? "error" : "ok")),
    });
    const f = (await getJobForensics(id, 10))!;
    expect(f.callsTotal).toBe(30);
    expect(f.callsShown).toBe(10);
    expect(f.entries.filter((e) => e.kind === "call")).toHaveLength(10);
    expect(f.entries[0]).toMatchObject({ kind: "event", type: "started" });
    expect(f.entries[1]).toEqual({
      kind: "earlier_calls",
      at: at(10).toISOString(),
      until: at(30).toISOString(),
      calls: 20,
      errors: 1,
    });
    expect(f.entries[2]).toMatchObject({ kind: "call", durationMs: 1_020 });
    expect(f.entries.at(-1)).toMatchObject({ kind: "event", type: "timed_out" });
    // The summary counts every call, not only those shown.
    expect(f.calls[0]).toMatchObject({ calls: 30, errors: 1, maxMs: 1_029 });
  });

  it("takes in a split job's parts, each entry naming its part", async () => {
    const parent = await job();
    const p1 = await job(parent, { index: 1, of: parent });
    const p2 = await job(parent, { index: 2, of: parent });
    await db().jobEvent.createMany({
      data: [event(parent, 0, "split", 1), event(p1, 1, "started", 1), event(p2, 50, "started", 1)],
    });
    await db().modelCall.createMany({ data: [call(p1, 2, 2_000), call(p2, 51, 3_000)] });
    const f = (await getJobForensics(parent))!;
    expect(f.callsTotal).toBe(2);
    expect(f.entries.map((e) => (e.kind === "earlier_calls" ? null : e.part))).toEqual([null, 1, 1, 2, 2]);
    expect(f.entries.filter((e): e is TimelineEvent => e.kind === "event").map((e) => e.type)).toEqual([
      "split",
      "started",
      "started",
    ]);
  });

  it("is null for a job that does not exist", async () => {
    expect(await getJobForensics("00000000-0000-4000-8000-000000000000")).toBeNull();
  });
});
