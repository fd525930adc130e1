import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { closeDb, db } from "@/lib/db/client";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { QuotaRefused } from "@/lib/quota/errors";
import { createGeneration } from "./create-generation";
import { claim, release } from "@/lib/quota/reserves";
import { dropQuotaTenants, quotaTenant } from "@/lib/quota/test-fixtures";

afterAll(async () => {
  await dropQuotaTenants();
  await closeQueues();
  await closeRedis();
  await closeDb();
});

const slugOf = async (tenantId: string) =>
  (await db().tenant.findUniqueOrThrow({ where: { id: tenantId }, select: { slug: true } })).slug;
const jobsOf = (tenantId: string) => db().job.count({ where: { tenantId } });

async function refused(body: unknown): Promise<string> {
  const err = await createGeneration(body).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QuotaRefused);
  return (err as QuotaRefused).code;
}

describe("createGeneration: what POST /api/generations does", () => {
  it("queues a card_generation on `generations` for the tenant's ad, creating the ad on first sight", async () => {
    const t = await quotaTenant("api-gen", 1, 0);
    const adId = randomUUID();
    const { jobId } = await createGeneration({ tenant: await slugOf(t.tenantId), adId, kind: "generate" });
    await queue("generations").remove(jobId);
    expect(
      await db().job.findUniqueOrThrow({
        where: { id: jobId },
        select: { kind: true, queue: true, total: true, params: true, budgetSoftMs: true },
      }),
    ).toEqual({
      kind: "card_generation",
      queue: "generations",
      total: 1,
      params: { adId, kind: "generate" },
      budgetSoftMs: 1_200_000,
    });
    expect(await db().ad.findUnique({ where: { id: adId }, select: { tenantId: true } })).toEqual({
      tenantId: t.tenantId,
    });
  });

  it("refuses bad fields with a zod error before anything is created", async () => {
    const err = await createGeneration({ tenant: "Acme Corp", adId: "nope", kind: "redo" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(z.ZodError);
    expect((err as z.ZodError).issues.map((i) => i.path.join("."))).toEqual(["tenant", "adId", "kind"]);
  });

  it("refuses what cannot be served now, leaving nothing behind", async () => {
    const a = await quotaTenant("api-mine", 1);
    const b = await quotaTenant("api-theirs", 1);
    const tenant = await slugOf(a.tenantId);
    expect(await refused({ tenant, adId: b.adIds[0], kind: "generate" })).toBe("ad_not_found");
    expect(await refused({ tenant, adId: a.adIds[0], kind: "dislike" })).toBe("nothing_to_dislike");
    const r = await claim({ tenantId: a.tenantId, kind: "generate", subject: a.adIds[0]! });
    expect(await refused({ tenant, adId: a.adIds[0], kind: "generate" })).toBe("pack_empty");
    await release(r, "failed");
    const empty = await quotaTenant("api-nopack", 0);
    await db().quotaPack.delete({ where: { id: empty.packId } });
    expect(await refused({ tenant: await slugOf(empty.tenantId), adId: empty.adIds[0], kind: "generate" })).toBe(
      "no_pack",
    );
    expect(await jobsOf(a.tenantId)).toBe(0);
    expect(await jobsOf(empty.tenantId)).toBe(0);
    expect(await db().ad.findUnique({ where: { id: b.adIds[0]! }, select: { tenantId: true } })).toEqual({
      tenantId: b.tenantId,
    });
  });

  it("refuses a dislike while one runs, and once one was delivered", async () => {
    const t = await quotaTenant("api-dislike", 3);
    const tenant = await slugOf(t.tenantId);
    const ad = t.adIds[0]!;
    await db().cardImage.create({
      data: {
        adId: ad,
        reserveId: randomUUID(),
        kind: "generate",
        passes: 1,
        providerJobId: "img_1",
        contentType: "image/png",
        sizeBytes: 1,
        content: new Uint8Array([0]),
      },
    });
    const running = await claim({ tenantId: t.tenantId, kind: "dislike", subject: ad });
    expect(await refused({ tenant, adId: ad, kind: "dislike" })).toBe("dislike_in_progress");
    await release(running, "succeeded");
    await db().cardImage.create({
      data: {
        adId: ad,
        reserveId: running.id,
        kind: "dislike",
        passes: 1,
        providerJobId: "img_2",
        contentType: "image/png",
        sizeBytes: 1,
        content: new Uint8Array([0]),
      },
    });
    expect(await refused({ tenant, adId: ad, kind: "dislike" })).toBe("dislike_already_used");
    expect(await jobsOf(t.tenantId)).toBe(0);
  });
});
