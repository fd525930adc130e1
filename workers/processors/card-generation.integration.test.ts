import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { dislikeRetryUsed } from "@/lib/quota/ads";
import { books, dropQuotaTenants, quotaTenant } from "@/lib/quota/test-fixtures";
import { queueJobFor } from "@/test/helpers/jobs";
import { runJob } from "@/lib/runs/run-job";
import { createRouter } from "../simulators/router";
import { createImageSimulator, type ImageSimulatorOptions } from "../simulators/images";
import { cardGenerationWith } from "./card-generation";
import { createProviderClient } from "./card-generation-provider";

/**
 * card_generation end to end against the image provider simulator and the real database, at the
 * provider time scale of 0.005 (a 150 s poll attempt is 750 ms: an HTTP round trip on a busy
 * machine stays well inside every attempt). Each test sets the simulator's behaviour and counts
 * what the provider was paid for. The job's budget is one no test comes near: the database does
 * not get faster with the time scale.
 */

let server: http.Server;
let baseUrl = "";
const SCALE = 0.005;
let sim = createImageSimulator({ timeScale: SCALE });
const setSim = (options: ImageSimulatorOptions) => {
  sim = createImageSimulator({
    timeScale: SCALE,
    defectRate: 0,
    failRate: 0,
    renderMs: () => 30_000,
    pollMs: () => 100,
    downloadMs: () => 1_000,
    qaMs: () => 5_000,
    ...options,
  });
};

const processor = cardGenerationWith((log) => createProviderClient({ log, baseUrl, timeScale: SCALE }));

/** While set, the provider takes the submit and then answers nothing (a frozen provider). */
let silentAfterSubmit = false;
const held: http.ServerResponse[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (silentAfterSubmit && !(req.method === "POST" && req.url?.endsWith("/generations"))) return void held.push(res);
    createRouter(sim.routes)(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/images`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dropQuotaTenants();
  await closeDb();
});

async function generation(
  units: number,
  kind: "generate" | "dislike" = "generate",
  existing?: Awaited<ReturnType<typeof quotaTenant>>,
) {
  const t = existing ?? (await quotaTenant("cardgen", units));
  const job = await db().job.create({
    data: {
      kind: "card_generation",
      queue: "generations",
      tenantId: t.tenantId,
      total: 1,
      params: { adId: t.adIds[0]!, kind },
      budgetSoftMs: 600_000_000,
      budgetHardMs: 900_000_000,
      budgetSource: "operator:test",
      progressToken: `${Math.random().toString(16).slice(2)}${Date.now()}`,
    },
    select: { id: true },
  });
  const error = await runJob(
    { card_generation: processor },
    queueJobFor(job.id, "generations", "card_generation"),
    new AbortController().signal,
    logger("test"),
  ).catch((e: Error) => e);
  const row = await db().job.findUniqueOrThrow({
    where: { id: job.id },
    select: { status: true, message: true, result: true },
  });
  const images = await db().cardImage.findMany({
    where: { jobId: job.id },
    select: { passes: true, kind: true, sizeBytes: true, content: true },
  });
  return { t, jobId: job.id, row, images, error };
}

describe("card_generation: a paid generation under a quota reserve", () => {
  it("claims, renders, downloads, QA-checks, writes the image with one spend and releases", async () => {
    setSim({});
    const g = await generation(2);
    expect(g.row).toMatchObject({ status: "completed", message: `Generated the card of ad ${g.t.adIds[0]}.` });
    expect(g.images).toHaveLength(1);
    expect(Buffer.from(g.images[0]!.content).subarray(1, 4).toString()).toBe("PNG");
    expect(await books(g.t.packId)).toMatchObject({ size: 2, remaining: 1, spent: 1, live: 0 });
    expect(sim.submitted()).toBe(1);
  });

  it("a QA defect starts one silent regeneration; the last pass is delivered without QA; still one unit", async () => {
    setSim({ defectRate: 1 });
    const g = await generation(2);
    expect(g.row.status).toBe("completed");
    expect(g.images[0]!.passes).toBe(2);
    expect(sim.submitted()).toBe(2);
    expect(await books(g.t.packId)).toMatchObject({ remaining: 1, spent: 1, live: 0 });
  });

  it("a render slower than one poll attempt is picked up by the second attempt, without paying twice, heartbeating meanwhile", async () => {
    setSim({ renderMs: () => 200_000 });
    const t = await quotaTenant("cardgen-slow", 1);
    const beats: Date[] = [];
    const watch = setInterval(() => {
      void db()
        .quotaReserve.findFirst({ where: { tenantId: t.tenantId }, select: { heartbeatAt: true } })
        .then((r) => r && beats.push(r.heartbeatAt));
    }, 20);
    const g = await generation(1, "generate", t).finally(() => clearInterval(watch));
    expect(g.row.status).toBe("completed");
    expect(sim.submitted()).toBe(1);
    expect(new Set(beats.map((b) => b.getTime())).size).toBeGreaterThan(1);
    expect(await books(t.packId)).toMatchObject({ remaining: 0, spent: 1, live: 0 });
  });

  it("a run that died after its card was delivered and charged does not generate or charge again when retried", async () => {
    setSim({});
    const g = await generation(3);
    expect(g.row.status).toBe("completed");
    // The worker died between the release (image + spend, committed) and finishing the row: the
    // reaper abandoned it with cursor 1, and an operator retries it.
    await db().job.update({ where: { id: g.jobId }, data: { status: "queued", finishedAt: null } });
    await runJob(
      { card_generation: processor },
      queueJobFor(g.jobId, "generations", "card_generation"),
      new AbortController().signal,
      logger("test"),
    );
    const row = await db().job.findUniqueOrThrow({ where: { id: g.jobId }, select: { status: true, message: true } });
    expect(row.status).toBe("completed");
    expect(row.message).toContain("already delivered");
    expect(sim.submitted()).toBe(1);
    expect(await db().cardImage.count({ where: { jobId: g.jobId } })).toBe(1);
    expect(await books(g.t.packId)).toMatchObject({ remaining: 2, spent: 1, live: 0 });
  });

  it("a render the provider gives up on fails the job and returns the unit", async () => {
    setSim({ failRate: 1 });
    const g = await generation(1);
    expect(g.row.status).toBe("failed");
    expect(g.row.message).toContain("could not render the card");
    expect(g.row.message).toContain("The reserved unit was returned to the pack.");
    expect(g.images).toHaveLength(0);
    expect(await books(g.t.packId)).toMatchObject({ remaining: 1, spent: 0, live: 0 });
  });

  it("a render that never finishes within both poll attempts fails the job and returns the unit", async () => {
    setSim({ renderMs: () => 400_000 });
    const g = await generation(1);
    expect(g.row.status).toBe("failed");
    expect(g.row.message).toContain("poll failed 2 times");
    expect(sim.submitted()).toBe(1);
    expect(await books(g.t.packId)).toMatchObject({ remaining: 1, spent: 0, live: 0 });
  });

  it("an empty pack fails the job with the reason and never calls the provider", async () => {
    setSim({});
    const g = await generation(0);
    expect(g.row.status).toBe("failed");
    expect(g.row.message).toBe(
      "This tenant's image generation pack is used up (all 0 generations are spent or running). Nothing was generated.",
    );
    expect(sim.submitted()).toBe(0);
  });

  it("a dislike regenerates once under a dislike reserve: the flag is set while it runs and cleared after; a second is refused", async () => {
    setSim({ renderMs: () => 100_000 });
    const t = await quotaTenant("cardgen-dislike", 3);
    await generation(3, "generate", t);
    const flags: boolean[] = [];
    const watch = setInterval(() => void dislikeRetryUsed(t.adIds[0]!).then((f) => flags.push(f)), 20);
    const g = await generation(3, "dislike", t).finally(() => clearInterval(watch));
    expect(g.row.status).toBe("completed");
    expect(g.images[0]!.kind).toBe("dislike");
    expect(flags).toContain(true);
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(false);
    const again = await generation(3, "dislike", t);
    expect(again.row.message).toContain("The one free regeneration after a dislike");
    expect(await books(t.packId)).toMatchObject({ remaining: 1, spent: 2, live: 0 });
  });

  it("a provider that takes the submit and then answers nothing is an outage, not a failed generation: the job waits for the image provider and the unit goes back", async () => {
    setSim({});
    silentAfterSubmit = true;
    try {
      const { t, row, images, error } = await generation(3);
      expect((error as Error | undefined)?.name).toBe("OutsideServiceDown");
      expect(row.status).toBe("delayed");
      expect(row.message).toMatch(
        /^Waiting for the image provider, down since .* \(not answering: no answer to the poll within 2 min 30 s, attempt after attempt\)/,
      );
      expect(row.message).not.toMatch(/timed out|could not be generated/);
      expect(images).toHaveLength(0);
      // Nothing delivered, nothing charged: the unit is back for the run that resumes it.
      expect(await books(t.packId)).toMatchObject({ remaining: 3, spent: 0, live: 0 });
    } finally {
      silentAfterSubmit = false;
      for (const res of held.splice(0)) res.destroy();
      const { breakerKey } = await import("@/lib/ratelimit/breaker");
      const { redis } = await import("@/lib/redis/client");
      await redis().del(breakerKey("images"));
    }
  });
});
