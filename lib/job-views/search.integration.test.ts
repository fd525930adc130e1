import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { transactionOf } from "@/test/helpers/rows";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { escapeLike, idPrefixRange, listJobs } from "./queries";

const slugA = uniqueTenantSlug("search-a");
const slugB = uniqueTenantSlug("search-b");
// Ids chosen around one short id's edges: the range must take both ends and nothing beside them.
const tag = randomBytes(3).toString("hex"); // six hex digits, so reruns do not collide
const SHORT = `${tag}a1`;
const IDS = {
  first: `${SHORT}-0000-4000-8000-000000000000`,
  last: `${SHORT}-ffff-4fff-bfff-ffffffffffff`,
  before: `${tag}a0-ffff-4fff-bfff-ffffffffffff`,
  after: `${tag}a2-0000-4000-8000-000000000000`,
};
const names = { percent: `Ledger ${tag} 100%_final.csv`, plain: `ledger-${tag}.csv`, scan: `scan_${tag}.pdf` };
let withPercent: string;
let plain: string;
let ocr: string;

async function job(slug: string, id?: string): Promise<string> {
  const tenantId = await ensureTenant(slug);
  const row = await db().job.create({
    data: {
      ...(id ? { id } : {}),
      kind: "csv_import",
      queue: "imports",
      tenantId,
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "operator:test",
      progressToken: randomBytes(16).toString("hex"),
    },
    select: { id: true },
  });
  return row.id;
}

const ids = async (q: string) => (await listJobs({ q, limit: 200 })).jobs.map((j) => j.id);

beforeAll(async () => {
  for (const id of Object.values(IDS)) await job(slugA, id);
  withPercent = await job(slugB);
  plain = await job(slugB);
  ocr = await job(slugB);
  const upload = (jobId: string, filename: string) =>
    db().upload.create({ data: { jobId, filename, delimiter: ",", sizeBytes: 1, content: Buffer.from("x") } });
  await upload(withPercent, names.percent);
  await upload(plain, names.plain);
  await db().jobFile.create({
    data: {
      jobId: ocr,
      index: 0,
      filename: names.scan,
      contentType: "application/pdf",
      sizeBytes: 1,
      content: Buffer.from("x"),
    },
  });
});

afterAll(async () => {
  await deleteTenant(slugA);
  await deleteTenant(slugB);
  await closeDb();
});

describe("job search (q)", () => {
  it("finds jobs by the short id every page shows: exactly the ids that start with it", async () => {
    expect((await ids(SHORT)).sort()).toEqual([IDS.first, IDS.last].sort());
    // As pasted from a page that shortens it, in capitals, or with more of the id.
    expect((await ids(`${SHORT}…`)).sort()).toEqual([IDS.first, IDS.last].sort());
    expect((await ids(SHORT.toUpperCase())).sort()).toEqual([IDS.first, IDS.last].sort());
    expect(await ids(`${SHORT}-ffff`)).toEqual([IDS.last]);
  });

  it("finds a job by its full id", async () => {
    expect(await ids(IDS.after)).toEqual([IDS.after]);
    expect(await ids(IDS.before.toUpperCase())).toEqual([IDS.before]);
  });

  it("finds a tenant's jobs by the start of its slug", async () => {
    const found = await ids(slugB.slice(0, -2));
    expect(found.sort()).toEqual([withPercent, plain, ocr].sort());
  });

  it("finds jobs by file name, case-insensitively, an import's upload or any document of a batch", async () => {
    expect((await ids(`LEDGER-${tag.toUpperCase()}`)).sort()).toEqual([plain]);
    expect((await ids(`ledger`)).filter((id) => [withPercent, plain, ocr].includes(id)).sort()).toEqual(
      [withPercent, plain].sort(),
    );
    expect(await ids(`scan_${tag}`)).toEqual([ocr]);
  });

  it("reads % and _ in a query as the characters themselves", async () => {
    const ours = (found: string[]) =>
      found.filter((id) => [withPercent, plain, ocr, ...Object.values(IDS)].includes(id)).sort();
    // A bare "%" is not "anything": only the file whose name has one.
    expect(ours(await ids("%"))).toEqual([withPercent]);
    expect(await ids(`${tag} 100%`)).toEqual([withPercent]);
    // "_" is not "any one character": ledger-<tag>.csv has none.
    expect(ours(await ids("_")).sort()).toEqual([withPercent, ocr].sort());
    expect(await ids(`%_${tag}`)).toEqual([]);
  });

  it("finds a job by what it processed: a row's counterparty or description, or a failure's reason; with a tenant, only that tenant's", async () => {
    const tenantA = await ensureTenant(slugA);
    const tenantB = await ensureTenant(slugB);
    const row = (tenantId: string, jobId: string, n: number, counterparty: string, description: string) =>
      transactionOf(tenantId, jobId, n, { counterparty, description });
    await row(tenantA, IDS.first, 2, `Stadtwerke ${tag} Nord`, "monthly power");
    await row(tenantB, plain, 2, "Someone else", `invoice INV-${tag}-77`);
    await row(tenantB, withPercent, 2, `Stadtwerke ${tag} Nord`, "the same supplier, another tenant");
    await db().jobItemFailure.create({
      data: { jobId: ocr, row: 3, reason: `unreadable page ${tag} scan`, attempt: 1 },
    });

    expect((await ids(`stadtwerke ${tag}`)).sort()).toEqual([IDS.first, withPercent].sort());
    expect(await ids(`INV-${tag}`)).toEqual([plain]);
    expect(await ids(`page ${tag} scan`)).toEqual([ocr]);
    const scoped = await listJobs({ q: `Stadtwerke ${tag}`, tenant: slugA, limit: 200 });
    expect(scoped.jobs.map((j) => j.id)).toEqual([IDS.first]);
  });

  it("reads what jobs processed through trigram indexes, not a scan of every row", async () => {
    const plans = await db().$transaction(async (tx) => {
      await tx.$executeRaw`SET LOCAL enable_seqscan = off`;
      const rows = await tx.$queryRaw<{ "QUERY PLAN": string }[]>`
        EXPLAIN SELECT "jobId" FROM "Transaction" WHERE (counterparty || ' ' || description) ILIKE '%stadtwerke%'`;
      const failures = await tx.$queryRaw<{ "QUERY PLAN": string }[]>`
        EXPLAIN SELECT "jobId" FROM "JobItemFailure" WHERE reason ILIKE '%unreadable%'`;
      return [rows, failures].map((p) => p.map((l) => l["QUERY PLAN"]).join("\n"));
    });
    expect(plans[0]).toContain("Transaction_text_trgm_idx");
    expect(plans[1]).toContain("JobItemFailure_reason_trgm_idx");
  });

  it("finds nothing for a query that matches no id, tenant or file", async () => {
    expect(await ids(`nothing-${tag}-here`)).toEqual([]);
  });
});

describe("search helpers", () => {
  it("reads the start of an id as a primary-key range, and leaves other text alone", () => {
    expect(idPrefixRange("abcd1234")).toEqual({
      gte: "abcd1234-0000-0000-0000-000000000000",
      lte: "abcd1234-ffff-ffff-ffff-ffffffffffff",
    });
    expect(idPrefixRange("ABCD1234-56…")).toEqual({
      gte: "abcd1234-5600-0000-0000-000000000000",
      lte: "abcd1234-56ff-ffff-ffff-ffffffffffff",
    });
    expect(idPrefixRange("acme")).toBeNull();
    expect(idPrefixRange("abc")).toBeNull();
    expect(idPrefixRange("0".repeat(33))).toBeNull();
  });

  it("escapes LIKE's wildcards and its escape character", () => {
    expect(escapeLike("100%_a\\b")).toBe("100\\%\\_a\\\\b");
  });
});
