import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { HANDLED_EVENT } from "@/lib/diagnosis/awaiting-operator";
import { answerUseOf, transactionOf } from "@/test/helpers/rows";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { pruneOnce } from "./prune";
import { retentionStatus } from "./status";

/**
 * The retention pass against real rows: what each class names goes, what is younger or still
 * needed stays. Each test worker has a database of its own (test/global-setup.ts), so a pass here
 * sees this file's rows and what earlier files of the worker left (all younger than a day).
 */

const DAY = 86_400_000;
const now = new Date();
const ago = (days: number) => new Date(now.getTime() - days * DAY);
/** Every class keeps one day here; the rows below are made 2 days old (pruned) or half a day (kept). */
const oneDay: Env = {
  ...env(),
  BOUNDED_RETAIN_JOB_DETAIL_DAYS: 1,
  BOUNDED_RETAIN_JOBS_DAYS: 1,
  BOUNDED_RETAIN_MODEL_CALLS_DAYS: 1,
  BOUNDED_RETAIN_WEBHOOK_DELIVERIES_DAYS: 1,
  BOUNDED_RETAIN_ROLLUPS_DAYS: 1,
  BOUNDED_RETAIN_QUOTA_RECORDS_DAYS: 1,
  BOUNDED_RETAIN_AUDIT_DAYS: 1,
};
const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(closeDb);

/** A finished import with one of each kind of detail, its end `finishedDaysAgo`. */
async function finishedJob(
  tenantId: string,
  finishedDaysAgo: number,
  status: "completed" | "timed_out" = "completed",
  message: string | null = null,
) {
  const finishedAt = ago(finishedDaysAgo);
  const job = await db().job.create({
    data: {
      kind: "csv_import",
      queue: "imports",
      tenantId,
      status,
      total: 2,
      processed: 1,
      failed: 1,
      cursor: 2,
      attempt: 1,
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "default",
      progressToken: randomBytes(16).toString("hex"),
      createdAt: ago(finishedDaysAgo + 0.01),
      finishedAt,
      message,
    },
  });
  const jobId = job.id;
  await db().upload.create({
    data: { jobId, filename: "f.csv", delimiter: ",", sizeBytes: 3, content: Buffer.from("a,b") },
  });
  await db().jobItem.createMany({
    data: [
      { jobId, item: 1, attempt: 1, ok: true, committedAt: finishedAt },
      { jobId, item: 2, attempt: 1, ok: false, committedAt: finishedAt },
    ],
  });
  await db().jobItemFailure.create({ data: { jobId, row: 3, reason: "amount is zero", attempt: 1 } });
  await db().jobEvent.create({
    data: { jobId, type: "started", attempt: 1, message: "Attempt 1 started", at: finishedAt },
  });
  await answerUseOf(jobId, 2);
  await transactionOf(tenantId, jobId, 2);
  return jobId;
}

const detailOf = async (jobId: string) => ({
  items: await db().jobItem.count({ where: { jobId } }),
  failures: await db().jobItemFailure.count({ where: { jobId } }),
  events: await db().jobEvent.count({ where: { jobId } }),
  uploadBytes: (await db().upload.findUnique({ where: { jobId }, select: { content: true } }))?.content.length ?? 0,
  answerUses: await db().categoryAnswerUse.count({ where: { jobId } }),
});
const NONE = { items: 0, failures: 0, events: 0, uploadBytes: 0, answerUses: 0 };

async function tenant(): Promise<string> {
  const slug = uniqueTenantSlug("retention");
  tenants.push(slug);
  return ensureTenant(slug);
}

describe("the retention pass", () => {
  it("removes a finished job's detail past its days, keeps its row, counts and results, and never a job that waits on a person", async () => {
    const tenantId = await tenant();
    const old = await finishedJob(
      tenantId,
      2,
      "completed",
      "Imported 1 of 2 rows; 1 row could not be imported (see the list below).",
    );
    const young = await finishedJob(tenantId, 0.5);
    const awaiting = await finishedJob(tenantId, 2, "timed_out", "Timed out after 1 of 2 rows (budget 600 s).");
    const handled = await finishedJob(tenantId, 2, "timed_out", "Timed out after 1 of 2 rows (budget 600 s).");
    await db().jobEvent.create({
      data: { jobId: handled, type: HANDLED_EVENT, attempt: 1, message: "handled", at: ago(1.5) },
    });
    const youngDetail = await detailOf(young);
    const awaitingDetail = await detailOf(awaiting);

    const [pruned] = await pruneOnce({ now, env: oneDay, classes: ["job_detail"], batch: 1 });

    expect(pruned).toMatchObject({ name: "job_detail", behind: false });
    expect(pruned!.jobs).toBeGreaterThanOrEqual(2);
    expect(await detailOf(old)).toEqual(NONE);
    expect(await detailOf(handled)).toEqual(NONE);
    expect(await detailOf(young)).toEqual(youngDetail);
    expect(await detailOf(awaiting)).toEqual(awaitingDetail);
    const row = await db().job.findUniqueOrThrow({ where: { id: old } });
    // Its outcome stays, no longer pointing at the list of failures that went with the detail.
    expect(row).toMatchObject({
      status: "completed",
      processed: 1,
      failed: 1,
      message: "Imported 1 of 2 rows; 1 row could not be imported.",
    });
    expect(row.detailPrunedAt).not.toBeNull();
    // The file's name stays with its row; its bytes are gone.
    expect(await db().upload.findUnique({ where: { jobId: old }, select: { filename: true } })).toEqual({
      filename: "f.csv",
    });
    expect((await db().job.findUniqueOrThrow({ where: { id: awaiting } })).detailPrunedAt).toBeNull();
    // The customer's own results are not the platform's to prune.
    expect(await db().transaction.count({ where: { jobId: { in: [old, handled] } } })).toBe(2);
  });

  it("removes model calls, ended webhook deliveries, rollups, settled quota records and audit entries past their days, and nothing younger", async () => {
    const tenantId = await tenant();
    const jobId = await finishedJob(tenantId, 0.5);
    const marker = `retention-${randomUUID()}`;
    const call = (days: number) => ({
      model: marker,
      startedAt: ago(days),
      durationMs: 10,
      outcome: "ok" as const,
      jobKind: "csv_import",
    });
    await db().modelCall.createMany({ data: [call(2), call(2), call(0.5)] });
    const rollupsBefore = await db().modelCallRollup.count({ where: { model: marker } });
    const endpoint = await db().webhookEndpoint.create({
      data: { tenantId, url: "http://127.0.0.1:1/x", secret: "s" },
    });
    const delivery = (days: number, status: "delivered" | "pending") => ({
      id: randomUUID(),
      endpointId: endpoint.id,
      jobId,
      jobStatus: "completed" as const,
      url: endpoint.url,
      payload: {},
      status,
      createdAt: ago(days),
    });
    await db().webhookDelivery.createMany({
      data: [delivery(2, "delivered"), delivery(2, "pending"), delivery(0.5, "delivered")],
    });
    await db().rateLimitRollup.createMany({
      data: [
        { minute: ago(2), queue: marker, family: "f", tenant: "t", reschedules: 1, waitMs: 1, maxWaitMs: 1 },
        { minute: ago(0.5), queue: marker, family: "f", tenant: "t", reschedules: 1, waitMs: 1, maxWaitMs: 1 },
      ],
    });
    await db().auditEntry.createMany({
      data: [
        { at: ago(2), actor: marker, action: "test", result: "ok", message: "old" },
        { at: ago(0.5), actor: marker, action: "test", result: "ok", message: "young" },
      ],
    });

    await pruneOnce({ now, env: oneDay, classes: ["model_calls"] });
    expect(await db().modelCall.count({ where: { model: marker } })).toBe(1);
    // The rollups keep what the raw calls said: deleting a call does not take it out of them.
    expect(await db().modelCallRollup.count({ where: { model: marker } })).toBe(rollupsBefore);
    expect(rollupsBefore).toBe(2);

    const pack = await db().quotaPack.create({ data: { tenantId, size: 10, remaining: 10 } });
    const late = (days: number, resolution: "charged" | "debt") => ({
      reserveId: randomUUID(),
      packId: pack.id,
      tenantId,
      kind: "generate" as const,
      subject: randomUUID(),
      outcome: "succeeded" as const,
      resolution,
      reservedAt: ago(days),
      reclaimedAt: ago(days),
      releasedAt: ago(days),
    });
    // An old debt nobody settled stays: it is still owed.
    await db().lateRelease.createMany({ data: [late(2, "charged"), late(2, "debt"), late(0.5, "charged")] });

    const pruned = await pruneOnce({
      now,
      env: oneDay,
      classes: ["webhook_deliveries", "rollups", "quota_records", "audit"],
    });

    expect(pruned.every((p) => !p.behind)).toBe(true);
    // The old hour's rollup is past the rollups' own days; the young one stays.
    expect(await db().modelCallRollup.count({ where: { model: marker } })).toBe(1);
    expect(
      (await db().webhookDelivery.findMany({ where: { jobId }, select: { status: true } })).map((d) => d.status).sort(),
    ).toEqual(["delivered", "pending"]);
    expect((await db().rateLimitRollup.findMany({ where: { queue: marker } })).length).toBe(1);
    expect(
      (await db().lateRelease.findMany({ where: { packId: pack.id }, orderBy: { releasedAt: "asc" } })).map(
        (l) => l.resolution,
      ),
    ).toEqual(["debt", "charged"]);
    expect((await db().auditEntry.findMany({ where: { actor: marker } })).map((a) => a.message)).toEqual(["young"]);
    // Outside the pass the audit log is still append-only.
    await expect(db().auditEntry.deleteMany({ where: { actor: marker } })).rejects.toThrow(/append-only/);
  });

  it("a job's row goes once its detail is gone and it holds no results; an import's results stay until its tenant's own choice removes them", async () => {
    const keepsAll = await tenant();
    const chooses = await tenant();
    const kept = await finishedJob(keepsAll, 2);
    const old = await finishedJob(chooses, 2);
    const young = await finishedJob(chooses, 0.5);
    const awaiting = await finishedJob(chooses, 2, "timed_out", "Timed out after 1 of 2 rows (budget 600 s).");
    const agent = await finishedJob(keepsAll, 2);
    await db().transaction.deleteMany({ where: { jobId: agent } });
    await db().job.update({ where: { id: agent }, data: { kind: "agent_run", queue: "agent-batch" } });
    const exists = async (id: string) => (await db().job.count({ where: { id } })) === 1;
    const results = async (id: string) => db().transaction.count({ where: { jobId: id } });
    const classes = ["job_detail", "tenant_results", "jobs"] as const;

    // No tenant chose: results and the imports that made them stay; a job that made none goes.
    await pruneOnce({ now, env: oneDay, classes });
    expect(await exists(agent)).toBe(false);
    for (const id of [kept, old, young, awaiting]) expect(await exists(id)).toBe(true);
    expect(await results(old)).toBe(1);

    await db().tenant.update({ where: { id: chooses }, data: { resultsRetainDays: 1 } });
    const [, dry] = await pruneOnce({ now, env: oneDay, classes, dryRun: true });
    expect(dry).toMatchObject({ name: "tenant_results", cutoff: null, removed: { Transaction: 1 }, jobs: 1 });
    const [, gone] = await pruneOnce({ now, env: oneDay, classes });
    expect(gone).toMatchObject({ removed: { Transaction: 1 }, jobs: 1 });
    expect(await results(old)).toBe(0);
    // Younger than the tenant's days, another tenant's, or waiting on a person: kept.
    expect([await results(young), await results(kept), await results(awaiting)]).toEqual([1, 1, 1]);
    // Its detail and now its results gone, the old import's row went with the same pass's jobs class.
    expect(await exists(old)).toBe(false);
    for (const id of [kept, young, awaiting]) expect(await exists(id)).toBe(true);
  });

  it("a dry run removes nothing and counts what a pass would remove", async () => {
    const tenantId = await tenant();
    const old = await finishedJob(tenantId, 2);
    const before = await detailOf(old);

    const [dry] = await pruneOnce({ now, env: oneDay, classes: ["job_detail"], dryRun: true });

    expect(await detailOf(old)).toEqual(before);
    expect(dry!.jobs).toBeGreaterThanOrEqual(1);
    expect(dry!.removed).toMatchObject({ Upload: expect.any(Number), JobItem: expect.any(Number) });
    const [real] = await pruneOnce({ now, env: oneDay, classes: ["job_detail"] });
    expect(real!.removed).toEqual(dry!.removed);
    expect(real!.jobs).toBe(dry!.jobs);
  });

  it("a class that runs out of its share of a pass is behind and says so; the next pass goes on from there", async () => {
    const marker = `retention-${randomUUID()}`;
    await db().modelCall.createMany({
      data: Array.from({ length: 25 }, () => ({
        model: marker,
        startedAt: ago(2),
        durationMs: 1,
        outcome: "ok" as const,
      })),
    });
    const status = async () => (await retentionStatus({ now, env: oneDay })).find((s) => s.name === "model_calls")!;
    expect((await status()).overdueSeconds).toBeGreaterThan(0.9 * 86_400);

    const [first] = await pruneOnce({ now, env: oneDay, classes: ["model_calls"], batch: 10, classBudgetMs: 0 });
    expect(first).toMatchObject({ behind: true, removed: { ModelCall: 10 } });
    const [second] = await pruneOnce({ now, env: oneDay, classes: ["model_calls"], batch: 10 });
    expect(second!.behind).toBe(false);
    expect(await db().modelCall.count({ where: { model: marker } })).toBe(0);
    expect((await status()).overdueSeconds).toBe(0);
  });
});
