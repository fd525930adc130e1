import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { processMetrics } from "@/lib/metrics/metrics";
import { dislikeRetryUsed, ensureAd } from "./ads";
import { QuotaRefused } from "./errors";
import { claim, grantPack, heartbeatReserve, release } from "./reserves";
import { sweepReserves } from "./sweep";
import { books, dropQuotaTenants, quotaTenant } from "./test-fixtures";

afterAll(async () => {
  await dropQuotaTenants();
  await closeDb();
});

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(QuotaRefused);
  return (err as QuotaRefused).code;
}

async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  const metric = processMetrics().registry.getSingleMetric(name);
  const { values } = await metric!.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    .reduce((n, v) => n + v.value, 0);
}

describe("claim takes one unit atomically", () => {
  it("takes a unit into a live reserve; the books balance", async () => {
    const t = await quotaTenant("claim", 3);
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    expect(r).toMatchObject({ packId: t.packId, kind: "generate", subject: t.adIds[0] });
    expect(await books(t.packId)).toMatchObject({ size: 3, remaining: 2, live: 1, spent: 0 });
  });

  it("refuses with a typed error when the pack is empty, and when there is none, changing nothing", async () => {
    const t = await quotaTenant("empty", 1);
    await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    const err = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QuotaRefused);
    expect((err as QuotaRefused).code).toBe("pack_empty");
    expect((err as Error).message).toBe(
      "This tenant's image generation pack is used up (all 1 generations are spent or running).",
    );
    expect(await books(t.packId)).toMatchObject({ remaining: 0, live: 1 });

    const bare = await quotaTenant("bare", 0);
    await db().quotaPack.delete({ where: { id: bare.packId } });
    expect(await refusal(claim({ tenantId: bare.tenantId, kind: "generate", subject: bare.adIds[0]! }))).toBe(
      "no_pack",
    );
  });

  it("refuses another tenant's ad", async () => {
    const a = await quotaTenant("mine", 2);
    const b = await quotaTenant("theirs", 2);
    expect(await refusal(claim({ tenantId: a.tenantId, kind: "generate", subject: b.adIds[0]! }))).toBe("ad_not_found");
    expect(await ensureAd(a.tenantId, b.adIds[0]!)).toBeNull();
    expect(await books(a.packId)).toMatchObject({ remaining: 2, live: 0 });
  });

  it("never overdraws under 40 concurrent claims on a pack of 7", async () => {
    const t = await quotaTenant("race", 7);
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, () => claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! })),
    );
    const won = results.filter((r) => r.status === "fulfilled").length;
    const refused = results.filter(
      (r) => r.status === "rejected" && r.reason instanceof QuotaRefused && r.reason.code === "pack_empty",
    ).length;
    expect([won, refused]).toEqual([7, 33]);
    expect(await books(t.packId)).toMatchObject({ size: 7, remaining: 0, live: 7 });
  });
});

describe("release ends a reserve in one transaction", () => {
  it("success records one spend and removes the reserve; a repeated release charges nothing more", async () => {
    const t = await quotaTenant("spend", 2);
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    expect(await release(r, "succeeded")).toEqual({ type: "spent" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 0, spent: 1 });
    expect(await release(r, "succeeded")).toEqual({ type: "already_released" });
    expect(await release(r, "failed")).toEqual({ type: "already_released" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 0, spent: 1 });
  });

  it("failure refunds the unit", async () => {
    const t = await quotaTenant("refund", 2);
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    expect(await release(r, "failed")).toEqual({ type: "refunded" });
    expect(await books(t.packId)).toMatchObject({ remaining: 2, live: 0, spent: 0 });
  });

  it("writes the success's effect with the spend, or neither", async () => {
    const t = await quotaTenant("effect", 2);
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    await expect(
      release(r, "succeeded", { effect: async () => Promise.reject(new Error("disk full")) }),
    ).rejects.toThrow("disk full");
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 1, spent: 0 });
  });

  it("a job's later attempt takes over the reserve its killed attempt still holds: one unit, not refused by its own flag", async () => {
    const t = await quotaTenant("takeover", 3);
    const ad = t.adIds[0]!;
    const jobId = randomUUID();
    const dead = await claim({ tenantId: t.tenantId, kind: "dislike", subject: ad, jobId });
    const resumed = await claim({
      tenantId: t.tenantId,
      kind: "dislike",
      subject: ad,
      jobId,
      now: new Date(Date.now() + 60_000),
    });
    expect(resumed.id).toBe(dead.id);
    expect(await books(t.packId)).toMatchObject({ remaining: 2, live: 1, spent: 0 });
    // Another job is still refused while the flag is set.
    expect(await refusal(claim({ tenantId: t.tenantId, kind: "dislike", subject: ad, jobId: randomUUID() }))).toBe(
      "dislike_in_progress",
    );
    await release(resumed, "succeeded");
    expect(await books(t.packId)).toMatchObject({ remaining: 2, live: 0, spent: 1 });
  });

  it("a dislike sets the ad's flag while it runs and clears it whatever the outcome", async () => {
    const t = await quotaTenant("dislike", 5);
    const ad = t.adIds[0]!;
    const first = await claim({ tenantId: t.tenantId, kind: "dislike", subject: ad });
    expect(await dislikeRetryUsed(ad)).toBe(true);
    expect(await refusal(claim({ tenantId: t.tenantId, kind: "dislike", subject: ad }))).toBe("dislike_in_progress");
    await release(first, "failed");
    expect(await dislikeRetryUsed(ad)).toBe(false);

    // The failed one did not use up the free regeneration; a delivered one does.
    const second = await claim({ tenantId: t.tenantId, kind: "dislike", subject: ad });
    expect(await dislikeRetryUsed(ad)).toBe(true);
    await release(second, "succeeded");
    expect(await dislikeRetryUsed(ad)).toBe(false);
    expect(await refusal(claim({ tenantId: t.tenantId, kind: "dislike", subject: ad }))).toBe("dislike_already_used");
    expect(await dislikeRetryUsed(ad)).toBe(false);
    expect(await books(t.packId)).toMatchObject({ remaining: 4, live: 0, spent: 1 });
  });
});

describe("a release that finds its reserve swept never passes silently", () => {
  const window = { windowMs: 1000, leaseMs: 100 };

  async function swept(label: string, units: number, kind: "generate" | "dislike" = "generate") {
    const t = await quotaTenant(label, units);
    const start = new Date(Date.now() - 10_000);
    const r = await claim({ tenantId: t.tenantId, kind, subject: t.adIds[0]!, now: start });
    expect(await sweepReserves({ ...window, tenantId: t.tenantId })).toHaveLength(1);
    return { t, r };
  }

  it("a success is charged again, once, and counted", async () => {
    const { t, r } = await swept("late-charge", 2);
    expect(await books(t.packId)).toMatchObject({ remaining: 2, live: 0, spent: 0, reclaimed: 1 });
    const before = await metricValue("bounded_reserve_late_releases_total", {
      kind: "generate",
      resolution: "charged",
    });
    expect(await heartbeatReserve(r)).toBe(false);
    expect(await release(r, "succeeded")).toEqual({ type: "late", resolution: "charged" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 0, spent: 1, late: 1 });
    expect(await metricValue("bounded_reserve_late_releases_total", { kind: "generate", resolution: "charged" })).toBe(
      before + 1,
    );
    expect(await release(r, "succeeded")).toEqual({ type: "already_released" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, spent: 1, late: 1 });
  });

  it("an empty pack records a debt, which the next grant settles", async () => {
    const { t, r } = await swept("late-debt", 1);
    const other = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    expect(await release(r, "succeeded")).toEqual({ type: "late", resolution: "debt" });
    expect(await books(t.packId)).toMatchObject({ size: 1, remaining: 0, live: 1, spent: 0, debts: 1 });
    await release(other, "succeeded");
    expect(await grantPack(t.tenantId, 3)).toMatchObject({ settled: 1 });
    expect(await books(t.packId)).toMatchObject({ size: 4, remaining: 2, live: 0, spent: 2, debts: 0 });
  });

  it("a failure is recorded (the sweeper already refunded) and leaves a newer dislike's flag alone", async () => {
    const { t, r } = await swept("late-fail", 3, "dislike");
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(false);
    const newer = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]! });
    expect(await release(r, "failed")).toEqual({ type: "late", resolution: "none" });
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(true);
    expect(await db().lateRelease.findUniqueOrThrow({ where: { reserveId: r.id } })).toMatchObject({
      outcome: "failed",
      resolution: "none",
      kind: "dislike",
    });
    expect(await books(t.packId)).toMatchObject({ remaining: 2, live: 1, spent: 0, late: 1 });
    await release(newer, "failed");
  });

  it("a release of a reserve nobody knows changes nothing", async () => {
    const t = await quotaTenant("unknown", 1);
    const ghost = {
      id: randomUUID(),
      packId: t.packId,
      tenantId: t.tenantId,
      kind: "generate" as const,
      subject: t.adIds[0]!,
      jobId: null,
      reservedAt: new Date(),
    };
    expect(await release(ghost, "succeeded")).toEqual({ type: "already_released" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, spent: 0, late: 0 });
  });
});
