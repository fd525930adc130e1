import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { books, dropQuotaTenants, quotaTenant } from "@/lib/quota/test-fixtures";
import { closeRedis } from "@/lib/redis/client";
import { queueJobFor } from "@/test/helpers/jobs";
import { waitFor } from "@/test/helpers/wait";
import { cardGenerationWith } from "@/workers/processors/card-generation";
import { createProviderClient } from "@/workers/processors/card-generation-provider";
import { runJob } from "@/lib/runs/run-job";
import { createImageSimulator } from "@/workers/simulators/images";
import { createRouter } from "@/workers/simulators/router";
import { cancelJob } from "./cancel";

// A cancelled paid generation gives its reserved unit back at once, through the path every failed
// generation takes (not left for the sweeper).
const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000001",
  username: "oncall",
  role: "operator",
  via: "session",
};
const SCALE = 0.005;
let server: http.Server;
let baseUrl = "";

beforeAll(async () => {
  // A render that takes far longer than the test: the generation is still polling when it is cancelled.
  const sim = createImageSimulator({
    timeScale: SCALE,
    defectRate: 0,
    failRate: 0,
    renderMs: () => 100_000_000,
    pollMs: () => 100,
    downloadMs: () => 1_000,
    qaMs: () => 5_000,
  });
  server = http.createServer((req, res) => createRouter(sim.routes)(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/images`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dropQuotaTenants();
  await closeRedis();
  await closeDb();
});

describe("cancelling a card generation", () => {
  it("ends it cancelled and returns its reserved unit to the pack at once", async () => {
    const t = await quotaTenant("cancel-gen", 2);
    const job = await db().job.create({
      data: {
        kind: "card_generation",
        queue: "generations",
        tenantId: t.tenantId,
        total: 1,
        params: { adId: t.adIds[0]!, kind: "generate" },
        budgetSoftMs: 600_000_000,
        budgetHardMs: 900_000_000,
        budgetSource: "operator:test",
        progressToken: `${Math.random().toString(16).slice(2)}${Date.now()}`,
      },
      select: { id: true },
    });
    const processor = cardGenerationWith((log) => createProviderClient({ log, baseUrl, timeScale: SCALE }));
    const running = runJob(
      { card_generation: processor },
      queueJobFor(job.id, "generations", "card_generation"),
      new AbortController().signal,
      logger("test"),
    ).catch((e: Error) => e);
    await waitFor(async () => (await books(t.packId)).live === 1, {
      timeoutMs: 20_000,
      what: "the generation to hold its reserve",
    });

    expect(await cancelJob(job.id, operator)).toMatchObject({ type: "cancelling" });
    await running;

    const row = await db().job.findUniqueOrThrow({ where: { id: job.id }, select: { status: true, message: true } });
    expect(row.status).toBe("cancelled");
    expect(row.message).toMatch(/^Cancelled by oncall before any /);
    expect(await books(t.packId)).toMatchObject({ size: 2, remaining: 2, spent: 0, live: 0, reclaimed: 0 });
  });
});
