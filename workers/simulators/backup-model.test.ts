import OpenAI, {
  APIConnectionTimeoutError,
  AuthenticationError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import { startSimulators, type RunningSimulators } from "./server";

/**
 * The simulators' second model provider, through the official OpenAI client: an endpoint of its
 * own (`/backup/v1`) with its own models, key, failures and limits, each failing while the first
 * provider answers.
 */

let sim: RunningSimulators;
beforeAll(async () => {
  sim = await startSimulators({
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, apiKey: undefined },
    backupModel: {
      timeScale: 0.001,
      latencyMs: () => 1_000,
      apiKey: "sk-backup",
      errorRate: 0,
      limits: { concurrency: 1 },
    },
  });
});
afterAll(() => sim.close());

const client = (baseURL: string, apiKey = "sk-backup") => new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const ask = (openai: OpenAI, model: string) =>
  openai.chat.completions.create({ model, messages: [{ role: "user", content: "REWE Markt, weekly shop" }] });

describe("the second simulated model provider", () => {
  it("is another OpenAI-compatible endpoint with models of its own", async () => {
    const backup = client(sim.backupModelBaseUrl);
    expect(sim.backupModelBaseUrl).toMatch(/\/backup\/v1$/);
    expect((await backup.models.list()).data.map((m) => m.id)).toEqual(["bounded-sim-backup-1"]);
    const answer = await ask(backup, "bounded-sim-backup-1");
    expect(answer.choices[0]?.message.content).toBeTruthy();
    expect(answer.usage?.total_tokens).toBeGreaterThan(0);
    // Each serves only its own names.
    await expect(ask(backup, "bounded-sim-1")).rejects.toBeInstanceOf(NotFoundError);
    await expect(ask(client(sim.modelBaseUrl), "bounded-sim-backup-1")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("asks for its own key: a wrong one is refused there while the first provider answers", async () => {
    await expect(ask(client(sim.backupModelBaseUrl, "sk-wrong"), "bounded-sim-backup-1")).rejects.toBeInstanceOf(
      AuthenticationError,
    );
    expect((await ask(client(sim.modelBaseUrl, "sk-wrong"), "bounded-sim-1")).choices).toHaveLength(1);
  });

  it("has limits of its own: a second call at once is a 429 there, not at the first provider", async () => {
    await control("backup-model", { slowdown: 200 });
    try {
      const first = ask(client(sim.backupModelBaseUrl), "bounded-sim-backup-1");
      await waitFor(async () => (await stats("/backup/v1/_stats")).inFlight === 1, {
        timeoutMs: 5_000,
        what: "the first call to be in flight",
      });
      await expect(ask(client(sim.backupModelBaseUrl), "bounded-sim-backup-1")).rejects.toBeInstanceOf(RateLimitError);
      const primary = await Promise.all([1, 2].map(() => ask(client(sim.modelBaseUrl), "bounded-sim-1")));
      expect(primary).toHaveLength(2);
      await first;
    } finally {
      await control("backup-model", { slowdown: 1 });
    }
  });

  it("is silenced on its own: its calls are held while the first provider answers", async () => {
    expect((await control("backup-model", { silent: true })).silent).toBe(true);
    try {
      const impatient = new OpenAI({
        baseURL: sim.backupModelBaseUrl,
        apiKey: "sk-backup",
        maxRetries: 0,
        timeout: 300,
      });
      await expect(ask(impatient, "bounded-sim-backup-1")).rejects.toBeInstanceOf(APIConnectionTimeoutError);
      expect((await ask(client(sim.modelBaseUrl), "bounded-sim-1")).choices).toHaveLength(1);
    } finally {
      await control("backup-model", { silent: false });
    }
    expect((await ask(client(sim.backupModelBaseUrl), "bounded-sim-backup-1")).choices).toHaveLength(1);
  });

  it("fails on its own: its 500s leave the first provider answering", async () => {
    const failing = await startSimulators({
      model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, apiKey: undefined },
      backupModel: { errorRate: 1, timeScale: 0.001, latencyMs: () => 1_000, apiKey: undefined },
    });
    try {
      await expect(ask(client(failing.backupModelBaseUrl), "bounded-sim-backup-1")).rejects.toBeInstanceOf(
        InternalServerError,
      );
      expect((await ask(client(failing.modelBaseUrl), "bounded-sim-1")).choices).toHaveLength(1);
    } finally {
      await failing.close();
    }
  });
});

async function control(service: string, body: unknown): Promise<{ silent: boolean; slowdown: number }> {
  const r = await fetch(`${sim.url}/_control/${service}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return (await r.json()) as { silent: boolean; slowdown: number };
}

async function stats(path: string): Promise<{ inFlight: number }> {
  return (await (await fetch(`${sim.url}${path}`)).json()) as { inFlight: number };
}
