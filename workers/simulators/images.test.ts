import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROVIDER_POLL } from "@/lib/catalog/generation-policy";
import { waitFor } from "@/test/helpers/wait";
import { cardPng, createImageSimulator, IMAGE_LATENCY, sampleRenderMs } from "./images";
import { createRouter } from "./router";

let server: http.Server;
let base = "";
const sim = createImageSimulator({ timeScale: 0.001, defectRate: 1, failRate: 0, renderMs: () => 1_000_000 });

beforeAll(async () => {
  server = http.createServer(createRouter(sim.routes));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/images`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("the image provider simulator", () => {
  it("submit → running → succeeded → PNG download → QA verdict; every submit is paid; no cancel", async () => {
    const submitted = await fetch(`${base}/generations`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "a card" }),
    });
    expect(submitted.status).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    expect(sim.submitted()).toBe(1);
    expect(await (await fetch(`${base}/generations/${id}`)).json()).toMatchObject({ id, status: "running" });
    expect((await fetch(`${base}/generations/${id}/image`)).status).toBe(409);
    // The render (1,000 s, 1 s at this scale: room for the two looks above on a loaded machine) ends by
    // itself; the status it ends in is the check.
    const ended = await waitFor(
      async () => {
        const body = (await (await fetch(`${base}/generations/${id}`)).json()) as { status: string };
        return body.status !== "running" && body;
      },
      { timeoutMs: 10_000, what: "the render to end" },
    );
    expect(ended).toMatchObject({ status: "succeeded" });
    const image = Buffer.from(await (await fetch(`${base}/generations/${id}/image`)).arrayBuffer());
    expect(image.equals(cardPng(id))).toBe(true);
    expect(await (await fetch(`${base}/generations/${id}/qa`, { method: "POST", body: "{}" })).json()).toEqual({
      id,
      verdict: "defect",
    });
    expect((await fetch(`${base}/generations/${id}`, { method: "DELETE" })).status).toBe(405);
  });

  it("refuses a bad submit and an unknown generation with 4xx", async () => {
    expect((await fetch(`${base}/generations`, { method: "POST", body: JSON.stringify({}) })).status).toBe(400);
    expect((await fetch(`${base}/generations/img_nope`)).status).toBe(404);
  });

  it("renders in ~40 s at the median, with a tail past one poll attempt of the policy (150 s)", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 16807) % 2147483647;
      return seed / 2147483647;
    };
    const sample = Array.from({ length: 100_000 }, () => sampleRenderMs(random)).sort((a, b) => a - b);
    expect(sample[50_000]!).toBeGreaterThan(37_000);
    expect(sample[50_000]!).toBeLessThan(43_000);
    const pastOneAttempt = sample.filter((ms) => ms > PROVIDER_POLL.attemptTimeoutMs).length / sample.length;
    expect(pastOneAttempt).toBeGreaterThan(0.004);
    expect(pastOneAttempt).toBeLessThan(0.02);
    expect(sample.at(-1)!).toBeLessThanOrEqual(IMAGE_LATENCY.renderTailMaxMs);
    // Never past both attempts: a render always finishes within the worst case the policy counts.
    expect(sample.at(-1)!).toBeLessThanOrEqual(PROVIDER_POLL.attemptTimeoutMs * PROVIDER_POLL.attempts);
  });
});
