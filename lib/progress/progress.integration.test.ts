import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { cancelJob } from "@/lib/actions/cancel";
import { startAttempt } from "@/lib/runs/attempt";
import { commitItem } from "@/lib/runs/commit";
import { finalizeJob } from "@/lib/runs/finalize";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { eventReader } from "@/test/helpers/sse";
import { waitFor } from "@/test/helpers/wait";
import { closeHub, watch } from "./hub";
import { ensureProgressListener, PROGRESS_CHANNEL, stopProgressListener } from "./listener";
import { progressLinkNotFoundMessage } from "@/lib/jobs/messages";
import { progressResponse } from "./respond";
import { getProgressSnapshot, type ProgressSnapshot, REBUILD_EVERY_MS, readSnapshot } from "./snapshot";
import { MAX_STREAMS_PER_ADDRESS, openStreams, progressEventsResponse } from "./stream";
import { jobEventsResponse } from "./operator";

// Counts the computations of the customer's answer: a request served from the snapshot makes none.
const computed = vi.hoisted(() => ({ count: 0 }));
vi.mock("@/lib/progress/customer-progress", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/progress/customer-progress")>();
  return {
    ...original,
    getCustomerProgress: (...args: Parameters<typeof original.getCustomerProgress>) => {
      computed.count++;
      return original.getCustomerProgress(...args);
    },
  };
});

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000001",
  username: "oncall",
  role: "operator",
  via: "session",
};
const tenant = uniqueTenantSlug("progress");
const WAIT = { timeoutMs: 20_000 };

beforeAll(async () => {
  await ensureProgressListener();
});
afterAll(async () => {
  await closeHub();
  await stopProgressListener();
  await deleteTenant(tenant);
});

async function newJob(total = 5): Promise<{ id: string; token: string }> {
  const { id } = await makeJob(tenant, { total, softMs: 600_000, hardMs: 900_000 });
  const { progressToken } = await db().job.findUniqueOrThrow({ where: { id }, select: { progressToken: true } });
  return { id, token: progressToken };
}

const get = (token: string, headers: Record<string, string> = {}) =>
  progressResponse(new Request(`http://bounded.test/api/progress/${token}`, { headers }), token);

/** The stored answer once it satisfies `test`. */
async function snapshotWhere(
  token: string,
  what: string,
  test: (s: ProgressSnapshot, body: Record<string, unknown>) => boolean,
): Promise<ProgressSnapshot> {
  return waitFor(
    async () => {
      const s = await readSnapshot(token);
      return s && test(s, JSON.parse(s.body)) ? s : null;
    },
    { ...WAIT, what },
  );
}

/** An open event stream, read event by event. */
function openStream(
  token: string,
  address: string,
  lastEventId?: number,
  respond: (request: Request) => Promise<Response> = (request) => progressEventsResponse(request, token, address),
) {
  const abort = new AbortController();
  const headers: Record<string, string> = lastEventId ? { "last-event-id": String(lastEventId) } : {};
  const request = new Request(`http://bounded.test/api/progress/${token}/events`, { headers, signal: abort.signal });
  const response = respond(request);
  const { next } = eventReader(async () => (await response).body!);
  return { response, next, close: () => abort.abort() };
}

describe("the progress snapshot", () => {
  it("answers with an ETag, and a caller holding the current answer gets a 304 without the answer being computed again", async () => {
    const { token } = await newJob();
    const first = await get(token);
    expect(first.status).toBe(200);
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^".+"$/);
    expect(first.headers.get("cache-control")).toContain("no-cache");

    const before = computed.count;
    for (let i = 0; i < 50; i++) {
      const again = await get(token, { "if-none-match": etag });
      expect(again.status).toBe(304);
      expect(await again.text()).toBe("");
    }
    const plain = await get(token);
    expect(plain.status).toBe(200);
    expect(plain.headers.get("etag")).toBe(etag);
    expect(computed.count).toBe(before);
  });

  it("holds exactly the customer's answer as getCustomerProgress gives it", async () => {
    const { id, token } = await newJob(3);
    await db().job.update({
      where: { id },
      data: { status: "completed", processed: 3, finishedAt: new Date(), message: "Split by admin: p99 budget." },
    });
    const s = await snapshotWhere(token, "the completed answer", (_s, b) => b.status === "completed");
    const { getCustomerProgress } = await import("@/lib/progress/customer-progress");
    expect(JSON.parse(s.body)).toEqual(JSON.parse(JSON.stringify(await getCustomerProgress(token))));
    expect(s.body).not.toContain("admin");
  });

  it("an item commit, a run's end and a hand-written UPDATE each make a new version, announced to a watcher, whoever wrote them", async () => {
    const { id, token } = await newJob(5);
    const initial = (await getProgressSnapshot(token))!;
    const seen: ProgressSnapshot[] = [];
    const unwatch = await watch(token, { deliver: (s) => seen.push(s), close: () => undefined });

    const run = (await startAttempt(id))!;
    const running = await snapshotWhere(
      token,
      "the running answer",
      (s, b) => s.version > initial.version && b.status === "running",
    );

    await commitItem(id, run.attempt, 1, { ok: true, effect: async () => undefined });
    const committed = await snapshotWhere(token, "the commit of item 1", (_s, b) => b.processed === 1);
    expect(committed.version).toBeGreaterThan(running.version);

    await commitItem(id, run.attempt, 2, { ok: false, row: 3, reason: "date must look like 2026-01-31" });
    const failedItem = await snapshotWhere(token, "the failed item", (_s, b) => b.failed === 1);
    expect(JSON.parse(failedItem.body).failures).toEqual([{ row: 3, reason: "date must look like 2026-01-31" }]);

    // Outside every writer of the code: an operator's UPDATE by hand.
    await db().$executeRaw`UPDATE "Job" SET total = 7 WHERE id = ${id}::uuid`;
    const byHand = await snapshotWhere(token, "the hand-written total", (_s, b) => b.total === 7);
    expect(byHand.version).toBeGreaterThan(failedItem.version);

    await finalizeJob(id, run.attempt, { status: "completed", message: "done" });
    const ended = await snapshotWhere(
      token,
      "the finalized answer",
      (s, b) => s.terminal && b.status === "completed_with_errors",
    );
    expect(ended.version).toBeGreaterThan(byHand.version);

    await waitFor(() => seen.some((s) => s.version === ended.version), {
      ...WAIT,
      what: "the watcher to hear the end",
    });
    const versions = seen.map((s) => s.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    unwatch();
  });

  it("rebuilds a job at most once every REBUILD_EVERY_MS however often its rows commit, and the last answer has the last commit", async () => {
    const { id, token } = await newJob(20);
    await getProgressSnapshot(token);
    const run = (await startAttempt(id))!;
    await snapshotWhere(token, "the running answer", (_s, b) => b.status === "running");
    const before = computed.count;
    const started = Date.now();
    // Each commit is announced once the rebuild of the one before has ended: spacing them out is
    // the rebuilds' own doing, not a fold of announcements that arrived during one.
    for (let item = 1; item <= 20; item++) {
      await commitItem(id, run.attempt, item, { ok: true, effect: async () => undefined });
      await new Promise((r) => setTimeout(r, 60));
    }
    const elapsed = Date.now() - started;
    await snapshotWhere(token, "the last commit", (_s, b) => b.processed === 20);
    expect(computed.count - before).toBeLessThanOrEqual(Math.ceil(elapsed / REBUILD_EVERY_MS) + 2);
  });

  it("an operator's cancel makes a new version that says so", async () => {
    const { id, token } = await newJob(5);
    const initial = (await getProgressSnapshot(token))!;
    expect(await cancelJob(id, operator)).toMatchObject({ type: "cancelled" });
    const s = await snapshotWhere(token, "the cancelled answer", (_s, b) => b.status === "cancelled");
    expect(s.version).toBeGreaterThan(initial.version);
    expect(s.terminal).toBe(true);
  });

  it("a heartbeat alone, which the customer does not see, announces nothing", async () => {
    const { id, token } = await newJob(5);
    const heard: string[] = [];
    const client = new pg.Client({ connectionString: env().DATABASE_URL });
    client.on("notification", (msg) => msg.payload === token && heard.push(msg.payload));
    await client.connect();
    await client.query(`LISTEN ${PROGRESS_CHANNEL}`);
    try {
      await db().job.update({ where: { id }, data: { heartbeatAt: new Date(), cursor: 3 } });
      await db().job.update({ where: { id }, data: { processed: 1 } });
      // Delivered in commit order: had the heartbeat announced anything, it would be here first.
      await waitFor(() => heard.length > 0, { ...WAIT, what: "the commit's announcement" });
      expect(heard).toHaveLength(1);
    } finally {
      await client.end();
    }
  });

  it("a link that opens no job is answered as before: 404 with the same words, and nothing stored", async () => {
    for (const token of ["0123456789abcdef0123456789abcdef", "not-a-token", "../../etc/passwd"]) {
      const response = await get(token);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: { code: "not_found", message: progressLinkNotFoundMessage() } });
      expect(await readSnapshot(token)).toBeNull();
    }
  });
});

describe("the progress stream", () => {
  it("sends the current answer, then each commit as it lands, and ends by itself when the job ends", async () => {
    const { id, token } = await newJob(2);
    const run = (await startAttempt(id))!;
    await snapshotWhere(token, "the running answer", (_s, b) => b.status === "running");
    const stream = openStream(token, "198.51.100.1");
    expect((await stream.response).headers.get("content-type")).toContain("text/event-stream");
    const first = (await stream.next())!;
    expect(first.event).toBe("progress");
    expect(JSON.parse(first.data)).toMatchObject({ status: "running", processed: 0 });

    await commitItem(id, run.attempt, 1, { ok: true, effect: async () => undefined });
    let event = (await stream.next())!;
    expect(JSON.parse(event.data)).toMatchObject({ processed: 1 });
    expect(Number(event.id)).toBeGreaterThan(Number(first.id));

    await commitItem(id, run.attempt, 2, { ok: true, effect: async () => undefined });
    await finalizeJob(id, run.attempt, { status: "completed", message: "done" });
    do event = (await stream.next())!;
    while (!JSON.parse(event.data).terminal);
    expect(JSON.parse(event.data)).toMatchObject({ status: "completed", processed: 2 });
    expect(await stream.next()).toBeNull();
    expect(openStreams("198.51.100.1")).toBe(0);
  });

  it("a reconnect that already has the current version is told so instead of sent it again; one behind is sent it", async () => {
    const { token } = await newJob();
    const current = (await getProgressSnapshot(token))!;
    const same = openStream(token, "198.51.100.2", current.version);
    expect(await same.next()).toMatchObject({ event: "ready", data: JSON.stringify({ version: current.version }) });
    same.close();
    const behind = openStream(token, "198.51.100.2", current.version - 1);
    expect(await behind.next()).toMatchObject({ event: "progress", id: String(current.version), data: current.body });
    behind.close();
  });

  it("never carries another job's answer", async () => {
    const mine = await newJob(4);
    const other = await newJob(9);
    const stream = openStream(mine.token, "198.51.100.3");
    const first = JSON.parse((await stream.next())!.data);
    expect(first.total).toBe(4);
    await db().job.update({ where: { id: other.id }, data: { processed: 5 } });
    await snapshotWhere(other.token, "the other job's change", (_s, b) => b.processed === 5);
    await db().job.update({ where: { id: mine.id }, data: { processed: 1 } });
    const next = JSON.parse((await stream.next())!.data);
    expect(next).toMatchObject({ total: 4, processed: 1 });
    stream.close();
  });

  it("refuses a link that opens no job as the page does", async () => {
    for (const token of ["0123456789abcdef0123456789abcdef", "nope"]) {
      const response = await openStream(token, "198.51.100.4").response;
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: { code: "not_found", message: progressLinkNotFoundMessage() } });
    }
    expect(openStreams("198.51.100.4")).toBe(0);
  });

  it(`holds an address to ${MAX_STREAMS_PER_ADDRESS} open streams with a clear 429, frees a slot when one closes, and leaves other addresses alone`, async () => {
    const { token } = await newJob();
    const address = "198.51.100.5";
    const streams = Array.from({ length: MAX_STREAMS_PER_ADDRESS }, () => openStream(token, address));
    for (const s of streams) expect((await s.response).status).toBe(200);
    const refused = await openStream(token, address).response;
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((await refused.json()).error).toMatchObject({
      code: "too_many_streams",
      message: expect.stringContaining(`at most ${MAX_STREAMS_PER_ADDRESS}`),
    });
    const elsewhere = openStream(token, "198.51.100.6");
    expect((await elsewhere.response).status).toBe(200);
    elsewhere.close();

    streams[0]!.close();
    await waitFor(() => openStreams(address) < MAX_STREAMS_PER_ADDRESS, {
      ...WAIT,
      what: "the closed stream's slot to be freed",
    });
    const again = openStream(token, address);
    expect((await again.response).status).toBe(200);
    for (const s of [...streams, again]) s.close();
    await waitFor(() => openStreams(address) === 0, { ...WAIT, what: "every slot to be freed" });
  });

  it("ends every open stream when the process shuts its hub down", async () => {
    const { token } = await newJob();
    const stream = openStream(token, "198.51.100.7");
    await stream.next();
    await closeHub();
    expect(await stream.next()).toBeNull();
    expect(openStreams("198.51.100.7")).toBe(0);
  });
});

describe("the operator's stream", () => {
  it("sends the job page's facts by job id, never the progress link, each commit as it lands, and ends with the job; an id that names no job is a 404", async () => {
    const { id, token } = await newJob(3);
    const run = (await startAttempt(id))!;
    await snapshotWhere(token, "the running answer", (_s, b) => b.status === "running");
    const address = "198.51.100.20";
    const stream = openStream(token, address, undefined, (request) => jobEventsResponse(request, id, address));
    expect((await stream.response).headers.get("content-type")).toContain("text/event-stream");
    const first = (await stream.next())!;
    expect(first.data).not.toContain(token);
    const facts = JSON.parse(first.data);
    expect(Object.keys(facts).sort()).toEqual(
      ["at", "etaSeconds", "failed", "perSecond", "processed", "status", "terminal", "total", "version"].sort(),
    );
    expect(facts).toMatchObject({ status: "running", total: 3, processed: 0, failed: 0, terminal: false });
    expect(facts.version).toBe(Number(first.id));

    await commitItem(id, run.attempt, 1, { ok: true, effect: async () => undefined });
    let event = (await stream.next())!;
    expect(JSON.parse(event.data)).toMatchObject({ processed: 1 });
    await finalizeJob(id, run.attempt, { status: "completed", message: "done" });
    do event = (await stream.next())!;
    while (!JSON.parse(event.data).terminal);
    expect(JSON.parse(event.data)).toMatchObject({ status: "completed", processed: 1 });
    expect(await stream.next()).toBeNull();
    expect(openStreams(address)).toBe(0);

    for (const unknown of ["00000000-0000-4000-8000-000000000000", "nope"]) {
      const response = await jobEventsResponse(new Request("http://bounded.test/"), unknown, address);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: { code: "not_found", message: "No job with this id." } });
    }
    expect(openStreams(address)).toBe(0);
  });
});
