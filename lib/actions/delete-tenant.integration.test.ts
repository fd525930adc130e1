import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { toErrorResponse } from "@/lib/http/api";
import { createImport } from "@/lib/imports/create-import";
import { closeQueues } from "@/lib/queues/queues";
import { scopeOf } from "@/lib/ratelimit/buckets";
import { closeRedis, key, redis } from "@/lib/redis/client";
import { oldestDeletionSeconds, TenantBeingDeleted } from "@/lib/tenants/being-deleted";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { answerUseOf, transactionOf } from "@/test/helpers/rows";
import { uniqueTenantSlug } from "@/test/helpers/tenants";
import { deleteTenant, describeDeleteTenant, GLOBAL_TABLES, TENANT_TABLES } from "./delete-tenant";
import { describeRetry } from "./retry-messages";
import { retryJob } from "./retry";
import { continueTenantDeletions } from "./tenant-deletion";

/**
 * A tenant's deletion against the real schema: every table is either one the deletion goes
 * through or one that holds no tenant's rows, and after it no row of the tenant is left in any
 * table that can name it (read from the database's own columns), while another tenant keeps all.
 */

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000011",
  username: "tenant-oncall",
  role: "operator",
  via: "token",
};

afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** Every table of the schema, and the columns by which a row can name a tenant (its id, one of its jobs, its slug, one of its ads). */
async function schemaTables(): Promise<{ table: string; columns: string[] }[]> {
  const rows = await db().$queryRaw<{ table: string; column: string }[]>`
    SELECT t.table_name AS table, c.column_name AS column
    FROM information_schema.tables t JOIN information_schema.columns c
      ON c.table_schema = t.table_schema AND c.table_name = t.table_name
    WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`;
  const tables = new Map<string, string[]>();
  for (const r of rows) tables.set(r.table, [...(tables.get(r.table) ?? []), r.column]);
  return [...tables].map(([table, columns]) => ({ table, columns }));
}

/** Rows that name the tenant, in every table that has a column able to: from the schema, not from the deletion's list. */
async function rowsNaming(tenant: { id: string; slug: string }, jobIds: string[], adIds: string[]) {
  const counts: Record<string, number> = {};
  for (const { table, columns } of await schemaTables()) {
    const tests: string[] = [];
    if (columns.includes("tenantId")) tests.push(`"tenantId" = '${tenant.id}'`);
    if (columns.includes("jobId") && jobIds.length) tests.push(`"jobId" IN (${jobIds.map((j) => `'${j}'`).join(",")})`);
    if (columns.includes("adId") && adIds.length) tests.push(`"adId" IN (${adIds.map((a) => `'${a}'`).join(",")})`);
    if (columns.includes("tenant")) tests.push(`"tenant" = '${tenant.slug}'`);
    if (table === "Tenant") tests.push(`id = '${tenant.id}'`);
    if (tests.length === 0) continue;
    const [r] = await db().$queryRawUnsafe<{ n: bigint }[]>(
      `SELECT count(*) AS n FROM "${table}" WHERE ${tests.join(" OR ")}`,
    );
    counts[table] = Number(r!.n);
  }
  return counts;
}

/** A tenant with a row in each table a tenant can own: jobs (one split into a part) with their detail, results, quota, ads, webhooks, answers, rollups. */
async function populatedTenant(label: string) {
  const slug = uniqueTenantSlug(label);
  const id = await ensureTenant(slug);
  const job = (over: object = {}) =>
    db().job.create({
      data: {
        kind: "csv_import",
        queue: "imports",
        tenantId: id,
        status: "completed",
        total: 1,
        processed: 1,
        budgetSoftMs: 1,
        budgetHardMs: 2,
        budgetSource: "default",
        progressToken: randomBytes(16).toString("hex"),
        finishedAt: new Date(),
        ...over,
      },
    });
  const parent = await job();
  const part = await job({ parentId: parent.id });
  const jobId = parent.id;
  await db().upload.create({
    data: { jobId, filename: "a.csv", delimiter: ",", sizeBytes: 1, content: Buffer.from("a") },
  });
  await db().jobItem.create({ data: { jobId, item: 1, attempt: 1, ok: true } });
  const at = new Date();
  await db().jobBatch.create({
    data: {
      jobId,
      batchId: `batch_${randomUUID()}`,
      status: "completed",
      rows: 1,
      submittedAt: at,
      expectedBy: at,
      deadlineAt: at,
      lastMomentAt: at,
      decision: "d",
    },
  });
  await db().jobItemFailure.create({ data: { jobId: part.id, row: 2, reason: "r", attempt: 1 } });
  await db().jobEvent.create({ data: { jobId, type: "started", attempt: 1, message: "m" } });
  await db().jobFile.create({
    data: {
      jobId,
      index: 1,
      filename: "d.pdf",
      contentType: "application/pdf",
      sizeBytes: 1,
      content: Buffer.from("d"),
    },
  });
  await answerUseOf(jobId, 2);
  // A row of the import asked again (the part standing in for the re-ask job: the table is what counts here).
  await db().categoryReask.create({
    data: {
      jobId: part.id,
      sourceJobId: jobId,
      row: 2,
      previousSlug: "other",
      provider: "primary",
      model: "m",
      slug: "other",
    },
  });
  await db().modelCall.create({ data: { jobId, model: "m", startedAt: new Date(), durationMs: 1, outcome: "ok" } });
  await transactionOf(id, jobId, 2);
  await db().invoice.create({
    data: { tenantId: id, number: "INV-1", amountMinor: 1n, currency: "EUR", dueDate: new Date("2026-01-01") },
  });
  await db().marketplaceRecord.create({
    data: { tenantId: id, family: "orders", externalId: "o1", data: {}, jobId, page: 1 },
  });
  const endpoint = await db().webhookEndpoint.create({
    data: { tenantId: id, url: "http://127.0.0.1:1/h", secret: "s" },
  });
  await db().webhookDelivery.create({
    data: { id: randomUUID(), endpointId: endpoint.id, jobId, jobStatus: "completed", url: endpoint.url, payload: {} },
  });
  await db().categoryAnswer.create({
    data: {
      tenantId: id,
      key: randomBytes(32).toString("hex"),
      slug: "other",
      model: "m",
      promptVersion: 1,
      promptTokens: 1,
      completionTokens: 1,
      callShare: 1,
      expiresAt: new Date(Date.now() + 86_400_000),
    },
  });
  const pack = await db().quotaPack.create({ data: { tenantId: id, size: 2, remaining: 1 } });
  const ad = await db().ad.create({ data: { id: randomUUID(), tenantId: id } });
  const reserve = { packId: pack.id, tenantId: id, kind: "generate" as const, subject: ad.id, jobId };
  await db().quotaReserve.create({ data: { ...reserve, reservedAt: new Date(), heartbeatAt: new Date() } });
  await db().quotaSpend.create({
    data: { ...reserve, reserveId: randomUUID(), reservedAt: new Date(), spentAt: new Date() },
  });
  await db().reserveReclaim.create({
    data: {
      ...reserve,
      reserveId: randomUUID(),
      reservedAt: new Date(),
      heartbeatAt: new Date(),
      reclaimedAt: new Date(),
    },
  });
  await db().lateRelease.create({
    data: {
      ...reserve,
      reserveId: randomUUID(),
      outcome: "succeeded",
      resolution: "charged",
      reservedAt: new Date(),
      reclaimedAt: new Date(),
      releasedAt: new Date(),
    },
  });
  await db().cardImage.create({
    data: {
      adId: ad.id,
      jobId,
      reserveId: randomUUID(),
      kind: "generate",
      passes: 1,
      providerJobId: "p",
      contentType: "image/png",
      sizeBytes: 1,
      content: Buffer.from("i"),
    },
  });
  await db().rateLimitRollup.create({
    data: {
      minute: new Date(),
      queue: "syncs",
      family: "orders",
      tenant: slug,
      reschedules: 1,
      waitMs: 1,
      maxWaitMs: 1,
    },
  });
  const bucket = key("ratelimit", `{${scopeOf("orders", slug)}}`);
  await redis().hset(bucket, { tokens: "1" });
  await redis().hset(key("progress", parent.progressToken), { version: "1" });
  // More finished jobs, each with a row of its own, so a small batch takes several; the failed one
  // (the oldest, so the last batch reaches it) could be retried.
  const more = [];
  for (let i = 0; i < 5; i++) {
    const createdAt = new Date(Date.now() - (i + 1) * 86_400_000);
    const extra = await job(i === 4 ? { status: "failed", createdAt } : { createdAt });
    await db().jobEvent.create({ data: { jobId: extra.id, type: "started", attempt: 1, message: "m" } });
    more.push(extra.id);
  }
  return {
    tenant: { id, slug },
    jobIds: [parent.id, part.id, ...more],
    failedJobId: more[4]!,
    adIds: [ad.id],
    redisKeys: [bucket, key("progress", parent.progressToken)],
  };
}

describe("deleting a tenant", () => {
  it("knows every table of the schema: each is one the deletion goes through, or one that holds no tenant's rows", async () => {
    const listed = new Set([...TENANT_TABLES.map((t) => t.table), ...GLOBAL_TABLES, "Tenant"]);
    const unlisted = (await schemaTables()).map((t) => t.table).filter((t) => !listed.has(t));
    expect(unlisted).toEqual([]);
  });

  it("reads every table it deletes from by an index: the column naming the tenant (or its job, slug or ad) leads one", async () => {
    const ownerColumn = (owner: (typeof TENANT_TABLES)[number]["owner"]) =>
      owner.by === "slug" ? owner.column : owner.by;
    const unindexed: string[] = [];
    for (const { table, owner } of TENANT_TABLES) {
      const column = ownerColumn(owner);
      const [row] = await db().$queryRaw<{ indexed: boolean }[]>`
        SELECT EXISTS (
          SELECT 1 FROM pg_index i
          JOIN pg_class r ON r.oid = i.indrelid
          JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = i.indkey[0]
          WHERE r.relname = ${table} AND r.relnamespace = current_schema()::regnamespace AND a.attname = ${column}
        ) AS indexed`;
      if (!row?.indexed) unindexed.push(`${table}.${column}`);
    }
    expect(unindexed).toEqual([]);
  });

  it("says how long the oldest deletion still going on has been going on (bounded_tenant_deletion_oldest_seconds)", async () => {
    const slug = uniqueTenantSlug("deleting-since");
    const id = await ensureTenant(slug);
    await db().$executeRaw`UPDATE "Tenant" SET "deletingAt" = now() - interval '2 hours' WHERE id = ${id}::uuid`;
    try {
      const seconds = await oldestDeletionSeconds();
      expect(seconds).toBeGreaterThanOrEqual(7_200);
      expect(seconds).toBeLessThan(7_200 + 60);
    } finally {
      await db().$executeRaw`DELETE FROM "Tenant" WHERE id = ${id}::uuid`;
    }
  });

  it("previews by default, then removes every row and key of the tenant and nothing of another", async () => {
    const gone = await populatedTenant("delete-me");
    const kept = await populatedTenant("keep-me");
    const before = await rowsNaming(gone.tenant, gone.jobIds, gone.adIds);
    const keptBefore = await rowsNaming(kept.tenant, kept.jobIds, kept.adIds);
    // Every table that can name a tenant has a row of each, so none is checked empty by accident.
    expect(Object.entries(before).filter(([, n]) => n === 0)).toEqual([]);

    const preview = await deleteTenant(gone.tenant.slug, operator, {});
    expect(preview).toMatchObject({ type: "preview", rows: { Job: 7, Transaction: 1, Tenant: 1 } });
    expect(describeDeleteTenant(preview).message).toMatch(
      /^Nothing deleted yet\. Deleting .+ would remove \d+ rows \(.*\) and \d+ Redis keys; repeat with \?confirm=/,
    );
    expect(await rowsNaming(gone.tenant, gone.jobIds, gone.adIds)).toEqual(before);

    const wrong = await deleteTenant(gone.tenant.slug, operator, { confirm: kept.tenant.slug });
    expect(describeDeleteTenant(wrong)).toMatchObject({ status: 422, code: "confirm_mismatch" });
    expect(await rowsNaming(gone.tenant, gone.jobIds, gone.adIds)).toEqual(before);

    const deleted = await deleteTenant(gone.tenant.slug, operator, { confirm: gone.tenant.slug });
    expect(deleted.type).toBe("deleted");
    const after = await rowsNaming(gone.tenant, gone.jobIds, gone.adIds);
    expect(Object.entries(after).filter(([, n]) => n > 0)).toEqual([]);
    expect(await redis().exists(...gone.redisKeys)).toBe(0);
    expect(await rowsNaming(kept.tenant, kept.jobIds, kept.adIds)).toEqual(keptBefore);
    expect(await redis().exists(...kept.redisKeys)).toBe(kept.redisKeys.length);
    expect(describeDeleteTenant(await deleteTenant(gone.tenant.slug, operator, {}))).toMatchObject({ status: 404 });

    await deleteTenant(kept.tenant.slug, operator, { confirm: kept.tenant.slug });
  });

  it("is refused while a job of the tenant is still queued, running or waiting, and deletes nothing", async () => {
    const t = await populatedTenant("busy");
    await db().job.update({ where: { id: t.jobIds[0] }, data: { status: "running", finishedAt: null } });
    const before = await rowsNaming(t.tenant, t.jobIds, t.adIds);
    const refused = await deleteTenant(t.tenant.slug, operator, { confirm: t.tenant.slug });
    expect(describeDeleteTenant(refused)).toMatchObject({
      status: 409,
      code: "tenant_has_open_jobs",
      message: expect.stringMatching(/has 1 job still queued, running or waiting: cancel them or let them finish/),
    });
    expect(await rowsNaming(t.tenant, t.jobIds, t.adIds)).toEqual(before);
    await db().job.update({ where: { id: t.jobIds[0] }, data: { status: "completed" } });
    expect((await deleteTenant(t.tenant.slug, operator, { confirm: t.tenant.slug })).type).toBe("deleted");
  });

  it("goes a few jobs at a time when the batch is small, and leaves nothing of the tenant", async () => {
    const t = await populatedTenant("batches");
    const preview = await deleteTenant(t.tenant.slug, operator, {});
    const batches: number[] = [];
    const deleted = await deleteTenant(
      t.tenant.slug,
      operator,
      { confirm: t.tenant.slug },
      { batch: 2, afterBatch: (n) => void batches.push(n) },
    );
    // 7 jobs, 2 a batch: 4 batches, each its own statements.
    expect(batches).toEqual([1, 2, 3, 4]);
    expect(deleted.type).toBe("deleted");
    // What every batch noted adds up to what the dry run counted.
    expect(deleted).toMatchObject({ rows: (preview as { rows: Record<string, number> }).rows });
    const after = await rowsNaming(t.tenant, t.jobIds, t.adIds);
    expect(Object.entries(after).filter(([, n]) => n > 0)).toEqual([]);
    expect(await redis().exists(...t.redisKeys)).toBe(0);
  });

  it("a deletion stopped after its first batch answers 202 with how far it got, refuses new work for the tenant, and is finished by the next pass", async () => {
    const t = await populatedTenant("interrupted");
    const kept = await populatedTenant("not-interrupted");
    const keptBefore = await rowsNaming(kept.tenant, kept.jobIds, kept.adIds);
    const preview = (await deleteTenant(t.tenant.slug, operator, {})) as { rows: Record<string, number> };
    const crash = (n: number) => {
      if (n === 1) throw new Error("the process died here");
    };

    const stopped = await deleteTenant(
      t.tenant.slug,
      operator,
      { confirm: t.tenant.slug },
      { batch: 2, afterBatch: crash },
    );
    expect(stopped).toMatchObject({ type: "deleting", rows: { Job: 2 } });
    expect(describeDeleteTenant(stopped)).toMatchObject({
      status: 202,
      code: "deleting",
      message: expect.stringMatching(
        /is being deleted \(since .+\): \d+ rows \(Job 2, .*\) and \d+ Redis keys? removed so far\. It goes on by itself/,
      ),
    });
    // Asked again (a dry run, or confirmed), it says the same: the deletion is under way.
    expect(await deleteTenant(t.tenant.slug, operator, {})).toMatchObject({ type: "deleting", rows: { Job: 2 } });
    expect(await db().tenant.count({ where: { id: t.tenant.id } })).toBe(1);

    // The tenant takes no new work meanwhile: an import, a retry, the tenant's row for anything new.
    const csv = "date,amount,currency,counterparty,description\n2026-01-31,-12.50,EUR,Acme,January\n";
    const upload = createImport({ tenant: t.tenant.slug, filename: "a.csv", bytes: Buffer.from(csv) });
    await expect(upload).rejects.toBeInstanceOf(TenantBeingDeleted);
    const refused = toErrorResponse(await upload.catch((err: unknown) => err), "test");
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({
      error: { code: "tenant_being_deleted", message: expect.stringMatching(/is being deleted .* takes no new work/) },
    });
    expect(describeRetry(await retryJob(t.failedJobId, operator))).toMatchObject({
      status: 409,
      code: "tenant_being_deleted",
    });
    await expect(ensureTenant(t.tenant.slug)).rejects.toBeInstanceOf(TenantBeingDeleted);
    expect(await db().job.count({ where: { tenantId: t.tenant.id, status: { not: "completed" } } })).toBe(1);

    // The next pass finishes it; what every run noted adds up to what the dry run counted.
    const passes = await continueTenantDeletions({ batch: 2 });
    const mine = passes.find((p) => p.tenant === t.tenant.slug);
    expect(mine).toMatchObject({ done: true, total: { rows: preview.rows } });
    const after = await rowsNaming(t.tenant, t.jobIds, t.adIds);
    expect(Object.entries(after).filter(([, n]) => n > 0)).toEqual([]);
    expect(await redis().exists(...t.redisKeys)).toBe(0);
    expect(await rowsNaming(kept.tenant, kept.jobIds, kept.adIds)).toEqual(keptBefore);
    // A second pass finds nothing to do; the name is free for a new tenant.
    expect((await continueTenantDeletions({ batch: 2 })).find((p) => p.tenant === t.tenant.slug)).toBeUndefined();
    expect(describeDeleteTenant(await deleteTenant(t.tenant.slug, operator, {}))).toMatchObject({ status: 404 });

    await deleteTenant(kept.tenant.slug, operator, { confirm: kept.tenant.slug });
  });
});
