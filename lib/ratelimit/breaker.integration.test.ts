import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { Registry } from "prom-client";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { createMetrics, processMetrics } from "@/lib/metrics/metrics";
import { domainLabelValues } from "@/lib/reports/metric-sources";
import { attemptRequest } from "@/lib/http/outbound";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { breakerKey, createBreaker, serviceVerdict, type Breaker } from "./breaker";
import { OUTSIDE_SERVICES } from "./breaker-services";
import { isOutsideServiceDown, OutsideServiceDown } from "./errors";
import { waitFor } from "@/test/helpers/wait";

// Two connections: two worker processes sharing one breaker through Redis.
const workerA = createRedis("producer", { enableOfflineQueue: true });
const workerB = createRedis("producer", { enableOfflineQueue: true });
const keys = OUTSIDE_SERVICES.map(breakerKey);

beforeEach(async () => {
  await workerA.del(...keys);
});

afterAll(async () => {
  await workerA.del(...keys);
  await workerA.quit();
  await workerB.quit();
  await closeRedis();
});

const COOLDOWN_MS = 150;
const breakerOn = (redis: typeof workerA): Breaker =>
  createBreaker({ redis, threshold: 3, windowMs: 10_000, cooldownMs: COOLDOWN_MS });

const refused = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
const fail = (b: Breaker) => b.guard("model", () => Promise.reject(refused()));
const ok = (b: Breaker) => b.guard("model", () => Promise.resolve("answer"));

async function errorOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

describe("circuit breaker (real Redis, two workers)", () => {
  it("opens on a streak of systemic failures seen by either worker, and both stop calling at once", async () => {
    const a = breakerOn(workerA);
    const b = breakerOn(workerB);
    // Two failures: still closed, each call's own error comes back.
    expect((await errorOf(fail(a))) as Error).toMatchObject({ code: "ECONNREFUSED" });
    expect((await errorOf(fail(b))) as Error).toMatchObject({ code: "ECONNREFUSED" });
    // The third opens it: that call ends with the signal, not with its own failure.
    const third = await errorOf(fail(a));
    expect(isOutsideServiceDown(third)).toBe(true);
    expect((third as OutsideServiceDown).error).toContain("ECONNREFUSED");
    // Worker B sends nothing now.
    let called = false;
    const blocked = await errorOf(b.guard("model", async () => (called = true)));
    expect(called).toBe(false);
    expect(blocked).toBeInstanceOf(OutsideServiceDown);
    expect((blocked as OutsideServiceDown).waitMs).toBeGreaterThan(0);
    expect((blocked as OutsideServiceDown).waitMs).toBeLessThanOrEqual(COOLDOWN_MS);
    // Other services are not affected.
    await expect(b.guard("ocr", async () => "fine")).resolves.toBe("fine");
    const [model] = await a.read();
    expect(model).toMatchObject({ service: "model", state: "open" });
    expect(model!.error).toContain("ECONNREFUSED");
  });

  it("half-open after the cool-down lets exactly one probe through; its success closes the breaker for everyone", async () => {
    const a = breakerOn(workerA);
    const b = breakerOn(workerB);
    for (let i = 0; i < 3; i++) await errorOf(fail(a));
    await delay(COOLDOWN_MS + 20); // elapsed time is the input: the cool-down runs from the opening above
    let probes = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const probe = a.guard("model", async () => {
      probes++;
      await gate;
      return "back";
    });
    // While the probe is out, the other worker still waits.
    await waitFor(() => probes === 1, { what: "the probe to be out", timeoutMs: 5_000 });
    expect(await errorOf(b.guard("model", async () => probes++))).toBeInstanceOf(OutsideServiceDown);
    expect((await a.read())[0]!.state).toBe("half_open");
    release();
    await expect(probe).resolves.toBe("back");
    expect(probes).toBe(1);
    await expect(ok(b)).resolves.toBe("answer");
    expect((await b.read())[0]).toMatchObject({ state: "closed", since: null, error: null });
  });

  it("each state change is counted once, by the worker that made it, however many workers watch", async () => {
    const changes = async () => {
      const metric = await processMetrics()
        .registry.getSingleMetric("bounded_outside_service_state_changes_total")!
        .get();
      const of = (state: string) =>
        metric.values.find((v) => v.labels.service === "model" && v.labels.state === state)?.value ?? 0;
      return { open: of("open"), half_open: of("half_open"), closed: of("closed") };
    };
    const before = await changes();
    const a = breakerOn(workerA);
    const b = breakerOn(workerB);
    for (let i = 0; i < 3; i++) await errorOf(fail(a));
    // More failures and refused calls on both workers: no new change.
    await errorOf(fail(b));
    await errorOf(ok(b));
    await delay(COOLDOWN_MS + 20); // elapsed time is the input: the cool-down runs from the opening above
    await Promise.allSettled([ok(a), ok(b), ok(a)]);
    const after = await changes();
    expect({
      open: after.open - before.open,
      half_open: after.half_open - before.half_open,
      closed: after.closed - before.closed,
    }).toEqual({ open: 1, half_open: 1, closed: 1 });
  });

  it("a failed probe opens it again for another cool-down", async () => {
    const a = breakerOn(workerA);
    const b = breakerOn(workerB);
    for (let i = 0; i < 3; i++) await errorOf(fail(a));
    await delay(COOLDOWN_MS + 20); // elapsed time is the input: the cool-down runs from the opening above
    expect(await errorOf(fail(b))).toBeInstanceOf(OutsideServiceDown);
    const [model] = await a.read();
    expect(model!.state).toBe("open");
    expect(model!.probeAt!.getTime()).toBeGreaterThan(Date.now());
    expect(await errorOf(ok(a))).toBeInstanceOf(OutsideServiceDown);
  });

  it("a 4xx about the request, a 429 and the caller's own abort never open it", async () => {
    const a = breakerOn(workerA);
    for (let i = 0; i < 5; i++)
      await a.guard("model", async () => ({ ok: false, status: 400 }), { failureOf: (r) => r });
    for (let i = 0; i < 5; i++)
      await a.guard("model", async () => ({ ok: false, status: 429 }), { failureOf: (r) => r });
    const controller = new AbortController();
    controller.abort(new Error("deadline"));
    for (let i = 0; i < 5; i++)
      await errorOf(a.guard("model", () => Promise.reject(refused()), { signal: controller.signal }));
    expect((await a.read())[0]!.state).toBe("closed");
  });

  it("a streak is broken by an answer: failures with successes between them do not open it", async () => {
    const a = breakerOn(workerA);
    for (let i = 0; i < 6; i++) {
      await errorOf(fail(a));
      await errorOf(fail(a));
      await ok(a);
    }
    expect((await a.read())[0]!.state).toBe("closed");
  });

  it("5xx results (failureOf) open it; the failing call then ends with the signal", async () => {
    const a = breakerOn(workerA);
    const five = () => a.guard("marketplace", async () => ({ ok: false, status: 503 }), { failureOf: (r) => r });
    await expect(five()).resolves.toEqual({ ok: false, status: 503 });
    await expect(five()).resolves.toEqual({ ok: false, status: 503 });
    expect(await errorOf(five())).toBeInstanceOf(OutsideServiceDown);
  });

  it("reads a real refused connection and a real 5xx as the service being down, a 4xx as up", async () => {
    const server: Server = createServer((req, res) => {
      res.statusCode = req.url === "/bad" ? 400 : 502;
      res.end("{}");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    try {
      expect(serviceVerdict(await attemptRequest({ url: new URL(`http://127.0.0.1:${port}/`) }))).toBe("down");
      expect(serviceVerdict(await attemptRequest({ url: new URL(`http://127.0.0.1:${port}/bad`) }))).toBe("up");
    } finally {
      await new Promise((r) => server.close(r));
    }
    // The port is closed now: connection refused.
    expect(serviceVerdict(await attemptRequest({ url: new URL(`http://127.0.0.1:${port}/`) }))).toBe("down");
    expect(serviceVerdict(new Error("a bug of ours"))).toBe("unknown");
  });

  it("state changes are counted, and the up gauge reads the breakers", async () => {
    const registry = new Registry();
    const a = breakerOn(workerA);
    const m = createMetrics(registry, {
      defaultMetrics: false,
      labelValues: domainLabelValues(),
      outsideServices: async () => (await a.read()).map((r) => ({ service: r.service, up: r.state === "closed" })),
    });
    for (let i = 0; i < 3; i++) await errorOf(fail(a));
    m.outsideServiceStateChanged({ service: "model", state: "open" });
    const text = await registry.metrics();
    expect(text).toContain('bounded_outside_service_up{service="model"} 0');
    expect(text).toContain('bounded_outside_service_up{service="ocr"} 1');
    expect(text).toContain('bounded_outside_service_state_changes_total{service="model",state="open"} 1');
    expect(text).toContain('bounded_outside_service_state_changes_total{service="images",state="closed"} 0');
  });
});
