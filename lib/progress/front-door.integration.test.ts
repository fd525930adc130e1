import http from "node:http";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "@/lib/db/client";
import { processMetrics } from "@/lib/metrics/metrics";
import { key, redis } from "@/lib/redis/client";
import { SECURITY_HEADERS } from "@/lib/security/headers";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { eventReader } from "@/test/helpers/sse";
import { waitFor } from "@/test/helpers/wait";
import { installProgressFrontDoor } from "./front-door";
import { closeHub, subscribeToProgress } from "./hub";
import { ensureProgressListener, stopProgressListener } from "./listener";
import { progressResponse } from "./respond";
import { MAX_STREAMS_PER_ADDRESS, openStreams, progressEventsResponse } from "./stream";
import { heldSnapshot, readSnapshot, readStoredSnapshot, requestRebuild, trustCopies } from "./snapshot";

/**
 * The front door in a real HTTP server of this process, in front of a stand-in for the framework
 * that answers with the route's own function (`progressResponse`) and counts what reaches it.
 */
const tenant = uniqueTenantSlug("front-door");
const WAIT = { timeoutMs: 20_000 };
const framework = { requests: [] as string[] };
let server: http.Server;
let base = "";

beforeAll(async () => {
  await ensureProgressListener();
  await subscribeToProgress();
  installProgressFrontDoor();
  server = http.createServer((req, res) => {
    framework.requests.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? "/", "http://bounded.test");
    const [, token, events] = /^\/api\/progress\/([^/]+)(\/events)?$/.exec(url.pathname) ?? [];
    if (req.method !== "GET" || !token) {
      res.writeHead(299).end("framework");
      return;
    }
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value);
    const gone = new AbortController();
    res.once("close", () => gone.abort());
    const request = new Request(url, { headers, signal: gone.signal });
    const answer = events
      ? progressEventsResponse(request, token, req.socket.remoteAddress!)
      : progressResponse(request, token);
    void answer.then((response) => {
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) Readable.fromWeb(response.body as NodeReadableStream).pipe(res);
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await closeHub();
  await stopProgressListener();
  await deleteTenant(tenant);
});

async function newJob(): Promise<{ id: string; token: string }> {
  const { id } = await makeJob(tenant, { total: 5, softMs: 600_000, hardMs: 900_000 });
  const { progressToken } = await db().job.findUniqueOrThrow({ where: { id }, select: { progressToken: true } });
  return { id, token: progressToken };
}

const poll = (path: string, init: RequestInit = {}) => fetch(`${base}${path}`, init);
/**
 * Polls a new job's link until this process holds its answer: a read that the job's first
 * announcements overtake keeps no copy (a newer version may be on its way), so one poll may not.
 */
const heldAfterPolling = (token: string) =>
  waitFor(
    async () => {
      await poll(`/api/progress/${token}`);
      return heldSnapshot(token);
    },
    { ...WAIT, what: "a copy of the job's answer held" },
  );

/** An event stream of the test server, read event by event. */
async function openEvents(token: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const response = await poll(`/api/progress/${token}/events`, { headers, signal: abort.signal });
  const { next } = eventReader(async () => response.body!);
  return { response, next, close: () => abort.abort() };
}

async function fromCopyCount(): Promise<number> {
  const metric = await processMetrics().registry.getSingleMetric("bounded_progress_polls_from_copy_total")!.get();
  return metric.values[0]?.value ?? 0;
}

describe("the progress front door", () => {
  it("answers the polls of a job this process holds before the framework, as the route answers them, with the headers every answer carries", async () => {
    const { token } = await newJob();
    const first = await poll(`/api/progress/${token}`);
    expect(first.status).toBe(200);
    const etag = first.headers.get("etag")!;
    const body = await first.text();
    expect(framework.requests).toContain(`GET /api/progress/${token}`);
    const reached = framework.requests.length;
    const counted = await fromCopyCount();

    for (let i = 0; i < 20; i++) {
      const again = await poll(`/api/progress/${token}`, { headers: { "if-none-match": etag } });
      expect(again.status).toBe(304);
      expect(await again.text()).toBe("");
      expect(again.headers.get("etag")).toBe(etag);
      expect(again.headers.get("cache-control")).toBe("private, no-cache");
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(again.headers.get(name)).toBe(value);
    }
    // A caller without the answer gets it whole, byte for byte; a proxy's weak tag still matches.
    const plain = await poll(`/api/progress/${token}?t=1`, { headers: { "x-request-id": "caller-chosen-id-1" } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("application/json");
    expect(plain.headers.get("x-request-id")).toBe("caller-chosen-id-1");
    expect(await plain.text()).toBe(body);
    expect((await poll(`/api/progress/${token}`, { headers: { "if-none-match": `W/${etag}` } })).status).toBe(304);

    expect(framework.requests.length).toBe(reached);
    expect(await fromCopyCount()).toBe(counted + 22);
    const text = await processMetrics().registry.metrics();
    expect(text).toMatch(
      /bounded_http_requests_total\{[^}]*route="\/api\/progress\/\[token\]"[^}]*status="304"[^}]*\} \d+/,
    );
  });

  it("a committed change replaces the copy at once: the next poll gets the new answer, never the old one, still without the framework", async () => {
    const { id, token } = await newJob();
    const before = await heldAfterPolling(token);
    const etag = before.etag;

    await db().$executeRaw`UPDATE "Job" SET processed = 2 WHERE id = ${id}::uuid`;
    // No poll in between: the subscription itself brings the new copy.
    const held = await waitFor(() => (heldSnapshot(token)?.version ?? 0) > before.version && heldSnapshot(token), {
      ...WAIT,
      what: "this process to hold the new answer",
    });
    const reached = framework.requests.length;
    const next = await poll(`/api/progress/${token}`, { headers: { "if-none-match": etag } });
    expect(next.status).toBe(200);
    expect(next.headers.get("etag")).toBe(held.etag);
    expect(JSON.parse(await next.text()).processed).toBe(2);
    expect(framework.requests.length).toBe(reached);
    expect(held.etag).toBe((await readSnapshot(token))!.etag);
  });

  it("a rebuild numbers its version from the stored answer, never from a copy one version behind", async () => {
    const { token } = await newJob();
    const held = await heldAfterPolling(token);
    // Another process stored the next version; its announcement has not reached this one yet.
    await redis().hset(key("progress", token), { version: held.version + 1, etag: '"from-another-process"' });
    await requestRebuild(token);
    const stored = (await readStoredSnapshot(token))!;
    expect(stored.version).toBe(held.version + 2);
    expect(stored.etag).toBe(held.etag);
  });

  it("a stream of a job this process holds is opened before the framework: the current answer, each change as it lands, and its end with the job", async () => {
    const { id, token } = await newJob();
    const held = await heldAfterPolling(token);
    const reached = framework.requests.length;
    const stream = await openEvents(token);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(stream.response.headers.get(name)).toBe(value);
    const first = (await stream.next())!;
    expect(first).toMatchObject({ event: "progress", id: String(held.version) });
    expect(first.data).toBe(held.body);

    await db().$executeRaw`UPDATE "Job" SET processed = 4 WHERE id = ${id}::uuid`;
    const change = (await stream.next())!;
    expect(Number(change.id)).toBeGreaterThan(held.version);
    expect(JSON.parse(change.data).processed).toBe(4);

    await db()
      .$executeRaw`UPDATE "Job" SET status = 'completed', processed = 5, "finishedAt" = now() WHERE id = ${id}::uuid`;
    let last = change;
    for (let event = await stream.next(); event; event = await stream.next()) last = event;
    expect(JSON.parse(last.data)).toMatchObject({ status: "completed", terminal: true });
    expect(framework.requests.length).toBe(reached);
    await waitFor(() => openStreams("127.0.0.1") === 0, { ...WAIT, what: "the stream's place to be given back" });
  });

  it("a reconnect that already has the current version gets `ready`, not the answer again", async () => {
    const { token } = await newJob();
    const held = await heldAfterPolling(token);
    const stream = await openEvents(token, { "last-event-id": String(held.version) });
    expect(await stream.next()).toMatchObject({ event: "ready", data: `{"version":${held.version}}` });
    stream.close();
  });

  it("an address at its cap goes on to the route, which refuses it, whatever X-Forwarded-For it forges; a stream that closes gives its place back", async () => {
    const { token } = await newJob();
    await heldAfterPolling(token);
    const streams = [];
    // No proxy is trusted here: a forged header names another address on every stream, and all of
    // them count against the socket's.
    for (let i = 0; i < MAX_STREAMS_PER_ADDRESS; i++) {
      const stream = await openEvents(token, { "x-forwarded-for": `203.0.113.${i + 1}` });
      await stream.next();
      streams.push(stream);
    }
    expect(openStreams("127.0.0.1")).toBe(MAX_STREAMS_PER_ADDRESS);
    const reached = framework.requests.length;
    const refused = await poll(`/api/progress/${token}/events`);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.code).toBe("too_many_streams");
    expect(framework.requests.length).toBe(reached + 1);

    streams.pop()!.close();
    await waitFor(() => openStreams("127.0.0.1") === MAX_STREAMS_PER_ADDRESS - 1, {
      ...WAIT,
      what: "the closed stream's place to be given back",
    });
    const again = await openEvents(token);
    expect(again.response.status).toBe(200);
    expect(framework.requests.length).toBe(reached + 1);
    again.close();
    for (const stream of streams) stream.close();
    await waitFor(() => openStreams("127.0.0.1") === 0, { ...WAIT, what: "every place to be given back" });
  });

  it("whatever it does not hold goes on to the framework untouched: unknown and malformed links, other methods and paths, a copy the subscription no longer vouches for", async () => {
    const { token } = await newJob();
    await heldAfterPolling(token);
    const through = async (path: string, init: RequestInit = {}) => {
      const reached = framework.requests.length;
      const response = await poll(path, init);
      await response.arrayBuffer();
      expect(framework.requests.length, `${init.method ?? "GET"} ${path}`).toBe(reached + 1);
      return response;
    };
    expect((await through(`/api/progress/${"0".repeat(32)}`)).status).toBe(404);
    await through(`/api/progress/${token.toUpperCase()}`);
    await through(`/api/progress/${token}x`);
    await through(`/api/progress/${token}/result.csv`);
    await through(`/api/progress/${token}`, { method: "POST", body: "{}" });
    await through(`/api/progress/${token}`, { method: "HEAD" });
    await through(`/api/progress//${token}`);

    // The subscription dropped: copies may be out of date, so none is served until it is back.
    trustCopies(false);
    try {
      expect(heldSnapshot(token)).toBeUndefined();
      expect((await through(`/api/progress/${token}`)).status).toBe(200);
    } finally {
      trustCopies(true);
    }
  });

  it("an answer older than the stale limit is not served from memory: the route serves it and asks for a fresh one", async () => {
    const { token } = await newJob();
    const held = await heldAfterPolling(token);
    expect(heldSnapshot(token, held.computedAt + 4_000)).toBe(held);
    expect(heldSnapshot(token, held.computedAt + 5_001)).toBeUndefined();
  });
});
