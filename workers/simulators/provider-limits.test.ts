import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createModelSimulator } from "./model";
import { createOcrSimulator } from "./ocr";
import { createRouter, type Route } from "./router";
import { waitFor } from "@/test/helpers/wait";

const servers: http.Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function serve(routes: Route[]): Promise<string> {
  const server = http.createServer(createRouter(routes));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const chat = (base: string) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "bounded-sim-1", messages: [{ role: "user", content: "hello" }] }),
  });

describe("the simulated providers' limits", () => {
  it("the model answers 429 with Retry-After and an OpenAI-style error beyond its calls in flight, and counts it", async () => {
    const sim = createModelSimulator({
      errorRate: 0,
      timeScale: 1,
      latencyMs: () => 200,
      limits: { concurrency: 2, rps: 1_000 },
    });
    const base = await serve(sim.routes);
    const first = [chat(base), chat(base)];
    await waitFor(() => sim.inFlight() === 2, { what: "the first two calls to be answering", timeoutMs: 5_000 });
    const refused = await chat(base);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(Number(refused.headers.get("retry-after-ms"))).toBe(1_000);
    expect(await refused.json()).toEqual({
      error: {
        message: expect.stringContaining("2 requests in flight"),
        type: "requests",
        param: null,
        code: "rate_limit_exceeded",
      },
    });
    expect((await Promise.all(first)).map((r) => r.status)).toEqual([200, 200]);
    // The answered calls gave their places back.
    expect((await chat(base)).status).toBe(200);
    const stats = await (await fetch(`${base}/v1/_stats`)).json();
    expect(stats).toMatchObject({
      service: "model",
      concurrency: 2,
      inFlight: 0,
      admitted: 3,
      rejected: { total: 1, concurrency: 1, rate: 0 },
    });
  });

  it("the model answers 429 beyond its requests per second, with the wait for the next token", async () => {
    // 2 a second: a burst of 2, then one every 500 ms.
    const sim = createModelSimulator({
      errorRate: 0,
      timeScale: 1,
      latencyMs: () => 0,
      limits: { concurrency: 100, rps: 2 },
    });
    const base = await serve(sim.routes);
    expect((await chat(base)).status).toBe(200);
    expect((await chat(base)).status).toBe(200);
    const refused = await chat(base);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(Number(refused.headers.get("retry-after-ms"))).toBeGreaterThan(400);
    expect(Number(refused.headers.get("retry-after-ms"))).toBeLessThanOrEqual(500);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
    expect(await (await fetch(`${base}/v1/_stats`)).json()).toMatchObject({
      rejected: { total: 1, concurrency: 0, rate: 1 },
    });
    // DELETE resets the counters.
    expect(await (await fetch(`${base}/v1/_stats`, { method: "DELETE" })).json()).toMatchObject({
      admitted: 0,
      rejected: { total: 0 },
    });
  });

  it("the OCR service has the same kind of limits, counted at /ocr/_stats", async () => {
    const sim = createOcrSimulator({
      errorRate: 0,
      timeScale: 1,
      latencyMs: () => 0,
      limits: { concurrency: 10, rps: 1 },
    });
    const base = await serve(sim.routes);
    const ocr = () => fetch(`${base}/ocr`, { method: "POST", body: "a plain text receipt" });
    expect((await ocr()).status).toBe(200);
    const refused = await ocr();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await (await fetch(`${base}/ocr/_stats`)).json()).toMatchObject({
      service: "ocr",
      rejected: { total: 1, rate: 1 },
    });
  });
});
