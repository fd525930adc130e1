import { randomBytes } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { bulkReask, bulkReaskSchema } from "./bulk";

// Bulk re-ask by filter against the real PostgreSQL and BullMQ: the dry run counts the ended
// imports that have rows of the choice, the run makes one re-ask job each with exactly those rows.
const operator: Principal = { userId: "u-bulk", username: "bulk-oncall", role: "operator", via: "token" };
const tenants: string[] = [];

afterEach(async () => {
  await queue("imports").drain(true);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** An import that ended `status`, its rows answered by `models` in order (row 2 first, as a spreadsheet numbers them). */
async function importAnsweredBy(slug: string, status: "completed" | "running", models: string[]): Promise<string> {
  const tenantId = await ensureTenant(slug);
  const job = await db().job.create({
    data: {
      kind: "csv_import",
      queue: "imports",
      tenantId,
      status,
      total: models.length,
      cursor: models.length,
      processed: models.length,
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "default",
      progressToken: randomBytes(16).toString("hex"),
    },
  });
  await db().categoryAnswerUse.createMany({
    data: models.map((model, i) => ({
      jobId: job.id,
      row: i + 2,
      jobKind: "csv_import",
      source: "model" as const,
      model,
      promptTokens: 100,
      completionTokens: 5,
      callShare: 0.125,
    })),
  });
  return job.id;
}

describe("bulk re-ask by filter", () => {
  it("a dry run counts the ended imports with rows a fallback answered; the run starts one re-ask each, with just those rows", async () => {
    const slug = uniqueTenantSlug("bulk-reask");
    tenants.push(slug);
    const mixed = await importAnsweredBy(slug, "completed", [
      "bounded-sim-1",
      "bounded-sim-backup-1",
      "bounded-sim-backup-1",
    ]);
    await importAnsweredBy(slug, "completed", ["bounded-sim-1", "bounded-sim-1"]);
    await importAnsweredBy(slug, "running", ["bounded-sim-backup-1"]);
    const body = (dryRun: boolean) =>
      bulkReaskSchema.parse({ filter: { tenant: slug }, route: "primary", rows: "fallback", dryRun });

    expect(await bulkReask(body(true), operator)).toMatchObject({ type: "preview", imports: 1, overCap: false });
    const done = await bulkReask(body(false), operator);
    expect(done).toMatchObject({ type: "done", matched: 1, refused: [] });
    if (done.type !== "done") throw new Error("not done");
    const [reaskJobId] = done.started;
    const made = await db().job.findUniqueOrThrow({ where: { id: reaskJobId } });
    expect(made).toMatchObject({ kind: "category_reask", queue: "imports", status: "queued", total: 2 });
    expect(made.params).toEqual({ sourceJobId: mixed, provider: "primary", rows: "fallback", list: [3, 4] });
    expect(await queue("imports").getJob(reaskJobId!)).toBeTruthy();
    // Its re-ask is open: a second bulk run refuses that import, with the reason.
    const again = await bulkReask(body(false), operator);
    expect(again).toMatchObject({ type: "done", started: [], refused: [{ jobId: mixed }] });
    if (again.type === "done") expect(again.refused[0]!.reason).toMatch(/being asked again already/);
  });

  it("a body that names no provider, or rows it does not know, is refused before anything is read", () => {
    expect(bulkReaskSchema.safeParse({ filter: {}, rows: "all" }).success).toBe(false);
    expect(bulkReaskSchema.safeParse({ filter: {}, route: "primary", rows: "some" }).error?.issues[0]?.message).toBe(
      "rows is one of fallback, failed, all",
    );
    expect(bulkReaskSchema.safeParse({ route: "primary" }).success).toBe(false);
  });
});
