import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { attemptRequest } from "@/lib/http/outbound";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { breakerKey, createBreaker, type Breaker } from "./breaker";
import { OUTSIDE_SERVICES } from "./breaker-services";
import { isOutsideServiceDown, type OutsideServiceDown } from "./errors";
import { callsOf, outstanding, silenceKeys, withCallOwner } from "./silence";

/**
 * Silence detection against real Redis and a real HTTP server. Time scale 0.01: the model's
 * default threshold (40 s) is 400 ms, under the 2 s real floor, so the threshold is 2 s; the
 * check runs every 100 ms.
 */
const redis = createRedis("producer", { enableOfflineQueue: true });
const keys = OUTSIDE_SERVICES.flatMap((s) => silenceKeys(s, breakerKey(s)));
const THRESHOLD_MS = 2_000;

let server: Server;
let url: URL;
/** Requests to /hang are accepted and never answered (a frozen provider); /slow/<ms> answers after that long; anything else at once. */
const hanging: ServerResponse[] = [];

beforeEach(async () => {
  await redis.del(...keys);
  server = createServer((req, res) => {
    if (req.url === "/hang") return void hanging.push(res);
    const slow = /^\/slow\/(\d+)$/.exec(req.url ?? "");
    setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end("{}"), slow ? Number(slow[1]) : 5);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});

afterEach(async () => {
  for (const res of hanging.splice(0)) res.destroy();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

afterAll(async () => {
  await redis.del(...keys);
  await redis.quit();
  await closeRedis();
});

const breakerOf = (cooldownMs = 60_000): Breaker => createBreaker({ redis, timeScale: 0.01, cooldownMs });
const call = (b: Breaker, path: string) =>
  b.guard("model", () => attemptRequest({ url: new URL(path, url) }), { failureOf: (a) => (a.ok ? undefined : a) });

async function settled<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const started = Date.now();
  try {
    return { value: await p, ms: Date.now() - started };
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
}

describe("silence detection (real Redis, a provider that accepts calls and answers none)", () => {
  it("calls in flight with no answer past the threshold open the breaker with its own reason, and every call out ends as the outage, not as its item's failure", async () => {
    const b = breakerOf();
    // The service answered a moment ago, then froze with three calls out.
    await call(b, "/fast");
    const started = Date.now();
    const calls = await Promise.all([call(b, "/hang"), call(b, "/hang"), call(b, "/hang")].map(settled));
    for (const c of calls) expect(isOutsideServiceDown(c.error)).toBe(true);
    // Opened past the threshold and well before any attempt timeout (there is none here at all).
    expect(Date.now() - started).toBeGreaterThanOrEqual(THRESHOLD_MS);
    expect(Date.now() - started).toBeLessThan(THRESHOLD_MS + 2_000);
    const down = calls[0]!.error as OutsideServiceDown;
    expect(down.error).toMatch(/^not answering: 3 calls in flight, none answered for \d/);
    const [model] = await b.read();
    expect(model).toMatchObject({ state: "open" });
    expect(model!.error).toMatch(/^not answering: 3 calls in flight/);
    // The hung sockets were cut: nothing of this process is out any more, nor registered in Redis.
    expect([...outstanding.values()].filter((c) => c.service === "model")).toHaveLength(0);
    await waitFor(async () => (await redis.zcard(keys[0]!)) === 0, {
      timeoutMs: 10_000,
      what: "the registrations of the cut calls are gone",
    });
    // New calls do not go out while it is open.
    expect(isOutsideServiceDown((await settled(call(b, "/fast"))).error)).toBe(true);
  });

  it("OCR, called one document at a time, is seen frozen too: its only call, ignored for three thresholds, opens its breaker; a lone slow call elsewhere does not", async () => {
    const b = breakerOf();
    const ocr = (path: string) =>
      b.guard("ocr", () => attemptRequest({ url: new URL(path, url) }), { failureOf: (a) => (a.ok ? undefined : a) });
    await ocr("/fast");
    const lone = await settled(ocr("/hang"));
    expect(isOutsideServiceDown(lone.error)).toBe(true);
    expect(lone.ms).toBeGreaterThanOrEqual(3 * THRESHOLD_MS);
    expect(lone.ms).toBeLessThan(3 * THRESHOLD_MS + 2_000);
    expect((lone.error as OutsideServiceDown).error).toMatch(/^not answering: 1 call in flight, none answered for \d/);
    expect((await b.read()).find((r) => r.service === "ocr")).toMatchObject({ state: "open" });
    // The model's calls are many at a time: one alone, past three thresholds, is its tail.
    await call(b, "/fast");
    const slow = await settled(call(b, `/slow/${3.5 * THRESHOLD_MS}`));
    expect(slow.error).toBeUndefined();
    expect((await b.read()).find((r) => r.service === "model")).toMatchObject({ state: "closed" });
  });

  it("a normal long tail is not silence: one slow call alone, or slow calls while others are answered, never open the breaker", async () => {
    const b = breakerOf();
    // One call half again past the threshold with nothing else out.
    const lone = await settled(call(b, `/slow/${1.5 * THRESHOLD_MS}`));
    expect(lone.error).toBeUndefined();
    expect(lone.ms).toBeGreaterThanOrEqual(1.5 * THRESHOLD_MS - 50);
    // Two slow calls while fast answers keep coming.
    let answering = true;
    const traffic = (async () => {
      while (answering) await call(b, "/fast");
    })();
    const slow = await Promise.all(
      [call(b, `/slow/${1.25 * THRESHOLD_MS}`), call(b, `/slow/${1.25 * THRESHOLD_MS}`)].map(settled),
    );
    answering = false;
    await traffic;
    for (const s of slow) expect(s.error).toBeUndefined();
    expect((await b.read())[0]).toMatchObject({ state: "closed" });
  });

  it("a half-open probe that hangs past the threshold counts as a failure: the breaker opens again and the probe ends as the outage", async () => {
    const b = breakerOf(300);
    await call(b, "/fast");
    await Promise.all([call(b, "/hang"), call(b, "/hang")].map(settled));
    const opened = (await b.read())[0]!;
    expect(opened.state).toBe("open");
    await waitFor(async () => Date.now() >= opened.probeAt!.getTime(), {
      timeoutMs: 10_000,
      what: "the cool-down is over",
    });
    const probe = await settled(call(b, "/hang"));
    expect(isOutsideServiceDown(probe.error)).toBe(true);
    expect(probe.ms).toBeGreaterThanOrEqual(THRESHOLD_MS);
    const reopened = (await b.read())[0]!;
    expect(reopened.state).toBe("open");
    // Still the same outage: it began when the service fell silent, not at the probe.
    expect(reopened.since!.getTime()).toBe(opened.since!.getTime());
    // A probe that is answered closes it.
    await waitFor(async () => Date.now() >= reopened.probeAt!.getTime(), {
      timeoutMs: 10_000,
      what: "the second cool-down is over",
    });
    await expect(call(b, "/fast")).resolves.toMatchObject({ ok: true });
    expect((await b.read())[0]).toMatchObject({ state: "closed" });
  });

  it("a service slowed past its threshold is slow, not silent: each probe that hangs gives the next one longer, the answer closes the breaker and calls as slow go through after it", async () => {
    const SLOW_MS = 1.5 * THRESHOLD_MS;
    const b = breakerOf(300);
    await call(b, "/fast");
    // Slowed: two calls past the threshold with none answered look like silence at first.
    const first = await Promise.all([call(b, `/slow/${SLOW_MS}`), call(b, `/slow/${SLOW_MS}`)].map(settled));
    for (const c of first) expect(isOutsideServiceDown(c.error)).toBe(true);
    // Probes, one per cool-down: the first waits the threshold and is cut; the next waits twice
    // that and gets its answer.
    const probes: { ok: boolean; ms: number }[] = [];
    while (!probes.at(-1)?.ok) {
      const open = (await b.read())[0]!;
      expect(open.state).toBe("open");
      await waitFor(async () => Date.now() >= open.probeAt!.getTime(), {
        timeoutMs: 10_000,
        what: "the cool-down is over",
      });
      const probe = await settled(call(b, `/slow/${SLOW_MS}`));
      if (probe.error !== undefined) expect(isOutsideServiceDown(probe.error)).toBe(true);
      probes.push({ ok: probe.error === undefined, ms: probe.ms });
      expect(probes.length).toBeLessThanOrEqual(2);
    }
    expect(probes[0]).toMatchObject({ ok: false });
    expect(probes[0]!.ms).toBeLessThan(SLOW_MS);
    expect(probes[1]!.ms).toBeGreaterThanOrEqual(SLOW_MS - 50);
    expect((await b.read())[0]).toMatchObject({ state: "closed" });
    // The answer raised the threshold: calls as slow, several at once, are the service's pace now.
    const after = await Promise.all([1, 2, 3].map(() => settled(call(b, `/slow/${SLOW_MS}`))));
    for (const c of after) expect(c.error).toBeUndefined();
    expect((await b.read())[0]).toMatchObject({ state: "closed" });
    expect((await b.checkSilence("model"))!.thresholdMs).toBeGreaterThanOrEqual(2 * SLOW_MS);
  });

  it("a job whose deadline falls while its call is the half-open breaker's probe waits for the service: the outage, at once, whatever the probe's patience", async () => {
    const b = breakerOf(300);
    await call(b, "/fast");
    await Promise.all([call(b, "/hang"), call(b, "/hang")].map(settled));
    const cooled = async () => {
      const open = (await b.read())[0]!;
      await waitFor(async () => Date.now() >= open.probeAt!.getTime(), {
        timeoutMs: 10_000,
        what: "the cool-down is over",
      });
    };
    // A first probe hangs past its patience: the next one may wait twice the threshold.
    await cooled();
    expect(isOutsideServiceDown((await settled(call(b, "/hang"))).error)).toBe(true);
    await cooled();
    const probe = settled(withCallOwner("job-at-its-deadline", () => call(b, "/hang")));
    await waitFor(async () => callsOf("job-at-its-deadline").length === 1, {
      timeoutMs: 5_000,
      what: "the probe is out",
    });
    const started = Date.now();
    const outage = await b.downFor("job-at-its-deadline", ["model"]);
    expect(isOutsideServiceDown(outage)).toBe(true);
    expect(Date.now() - started).toBeLessThan(THRESHOLD_MS);
    expect((await probe).error).toBeDefined();
  });

  it("at a job's deadline, alternatives (a model route's providers) are down only when every one of them is", async () => {
    const b = breakerOf();
    const open = {
      state: "open",
      since: String(Date.now()),
      until: String(Date.now() + 60_000),
      error: "not answering",
    };
    await redis.del(breakerKey("model:backup"));
    try {
      await redis.hset(breakerKey("model"), open);
      // The primary down, the fallback answering: the job ran out of its own time.
      expect(await b.downFor("no-call-out", [["model", "model:backup"]])).toBeNull();
      expect(isOutsideServiceDown(await b.downFor("no-call-out", ["model"]))).toBe(true);
      await redis.hset(breakerKey("model:backup"), open);
      const both = await b.downFor("no-call-out", [["model", "model:backup"]]);
      expect(isOutsideServiceDown(both)).toBe(true);
      expect(both!.service).toBe("model");
    } finally {
      await redis.del(breakerKey("model"), breakerKey("model:backup"));
    }
  });
});
