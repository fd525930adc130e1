import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import type { ServiceFaultState } from "./faults";
import { startSimulators, type RunningSimulators } from "./server";

let sim: RunningSimulators;
beforeAll(async () => {
  sim = await startSimulators({
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000 },
    marketplace: { latencyMs: () => 0 },
  });
});
afterAll(() => sim.close());

const chat = { model: "bounded-sim-1", messages: [{ role: "user", content: "REWE" }] };
const call = (signal?: AbortSignal) =>
  fetch(`${sim.modelBaseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(chat),
    signal,
  });
const control = async (service: string, body?: unknown) => {
  const response = await fetch(
    `${sim.url}/_control/${service}`,
    body === undefined
      ? {}
      : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
  );
  return {
    status: response.status,
    body: (await response.json()) as ServiceFaultState & { error?: { message: string } },
  };
};

describe("a silent simulated service", () => {
  it("accepts the calls of a silenced service and answers none, while other services go on answering", async () => {
    expect(await control("model", { silent: true })).toEqual({
      status: 200,
      body: { service: "model", silent: true, slowdown: 1, held: 0 },
    });
    const caller = new AbortController();
    const pending = call(caller.signal).then(
      () => "answered",
      (e: Error) => e.name,
    );
    // The connection was accepted and the request read: the call is held, not refused.
    await waitFor(async () => (await control("model")).body.held === 1, {
      timeoutMs: 5_000,
      what: "the call to be held",
    });
    expect((await fetch(`${sim.url}/marketplace/orders?tenant=t-silence`)).status).toBe(200);
    expect((await fetch(`${sim.url}/healthz`)).status).toBe(200);
    // Not even an unknown path of the silent service is answered.
    const unknown = await fetch(`${sim.modelBaseUrl}/nothing-here`, { signal: AbortSignal.timeout(200) }).catch(
      (e: Error) => e.name,
    );
    expect(unknown).toBe("TimeoutError");

    caller.abort();
    expect(await pending).toBe("AbortError");
    await waitFor(async () => (await control("model")).body.held === 0, {
      timeoutMs: 5_000,
      what: "the abandoned call to be let go",
    });
  });

  it("answers new calls once switched back, and never the calls it held", async () => {
    await control("model", { silent: true });
    const caller = new AbortController();
    let answered = false;
    const held = call(caller.signal).then(
      () => (answered = true),
      () => undefined,
    );
    await waitFor(async () => (await control("model")).body.held === 1, {
      timeoutMs: 5_000,
      what: "the call to be held",
    });

    expect(await control("model", { silent: false })).toEqual({
      status: 200,
      body: { service: "model", silent: false, slowdown: 1, held: 1 },
    });
    expect((await call()).status).toBe(200);
    expect(answered).toBe(false);
    expect((await control("model")).body.held).toBe(1);
    caller.abort();
    await held;
  });

  it("is silent from the start when started so (BOUNDED_SIM_SILENT)", async () => {
    const silent = await startSimulators({ silent: ["ocr"] });
    try {
      const state = await fetch(`${silent.url}/_control/ocr`).then((r) => r.json());
      expect(state).toEqual({ service: "ocr", silent: true, slowdown: 1, held: 0 });
      const ocr = await fetch(`${silent.url}/ocr`, {
        method: "POST",
        body: "x",
        signal: AbortSignal.timeout(200),
      }).catch((e: Error) => e.name);
      expect(ocr).toBe("TimeoutError");
    } finally {
      await silent.close();
    }
  });

  it("refuses a control request it does not understand with a 4xx that says what it takes", async () => {
    for (const body of [{ silent: "yes" }, {}, { slowdown: 0.5 }, { slowdown: 601 }, { slow: 2 }]) {
      const bad = await control("model", body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error?.message).toContain('"slowdown": a number from 1 (as usual) to 600');
    }
    expect((await control("model")).body).toMatchObject({ silent: false, slowdown: 1 });
    const unknown = await control("weather", { silent: true });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error?.message).toContain("model, backup-model, ocr, images, marketplace");
  });
});

describe("a slowed simulated service", () => {
  it("answers every call that starts while it is slowed that many times later, and at its usual pace once set back", async () => {
    // The model answers in 1 real ms here (1,000 production ms at time scale 0.001).
    expect(await control("model", { slowdown: 600 })).toEqual({
      status: 200,
      body: { service: "model", silent: false, slowdown: 600, held: 0 },
    });
    const started = performance.now();
    expect((await call()).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(590);
    // Only the service named is slowed.
    expect((await control("ocr")).body.slowdown).toBe(1);

    expect((await control("model", { slowdown: 1 })).body.slowdown).toBe(1);
    const fast = await call(AbortSignal.timeout(500)).then(
      (r) => r.status,
      (e: Error) => e.name,
    );
    expect(fast).toBe(200);
  });
});
