import { randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis, redis } from "@/lib/redis/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { createImport } from "./create-import";

const HEADER = "date,amount,currency,counterparty,description";
const utf8 = (text: string) => new TextEncoder().encode(text);

const tenants: string[] = [];
const queueJobs: string[] = [];

function tenantFor(label: string): string {
  const slug = uniqueTenantSlug(label);
  tenants.push(slug);
  return slug;
}

afterEach(async () => {
  // Queue jobs first, so no worker on the test prefix ever sees a job whose row is gone.
  for (const id of queueJobs.splice(0)) await queue("imports").remove(id);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** Nothing at all was written for this tenant and this upload. */
async function expectNothingCreated(tenant: string, filename: string): Promise<void> {
  expect(await db().tenant.findUnique({ where: { slug: tenant } })).toBeNull();
  expect(await db().job.count({ where: { tenant: { slug: tenant } } })).toBe(0);
  expect(await db().upload.count({ where: { filename } })).toBe(0);
}

describe("createImport: a rejected upload leaves nothing behind", () => {
  const cases: { name: string; bytes: () => Uint8Array; status: number; code: string }[] = [
    {
      name: "a file over the size limit (413)",
      bytes: () => new Uint8Array(env().BOUNDED_UPLOAD_MAX_BYTES + 1).fill(0x61),
      status: 413,
      code: "file_too_large",
    },
    { name: "a file that is not text (415)", bytes: () => utf8("%PDF-1.7\n1 0 obj\n"), status: 415, code: "not_text" },
    { name: "an empty file (422)", bytes: () => new Uint8Array(0), status: 422, code: "empty_file" },
    {
      name: "a header missing required columns (422)",
      bytes: () => utf8("date,amount\n2026-01-01,1.00\n"),
      status: 422,
      code: "missing_columns",
    },
    {
      name: "columns separated by tabs (422)",
      bytes: () => utf8(`${HEADER.replaceAll(",", "\t")}\n2026-01-01\t1.00\tEUR\tRewe\tx\n`),
      status: 422,
      code: "wrong_delimiter",
    },
    {
      name: "more rows than the row limit (413)",
      bytes: () => utf8(`${HEADER}\n${"2026-01-01,1.00,EUR,Rewe,x\n".repeat(env().BOUNDED_UPLOAD_MAX_ROWS + 1)}`),
      status: 413,
      code: "too_many_rows",
    },
  ];

  for (const c of cases) {
    it(`${c.name} is answered as a value and creates no Tenant, Job or Upload row`, async () => {
      const tenant = tenantFor("rejected");
      const filename = `rejected-${randomUUID()}.csv`;

      const result = await createImport({ tenant, filename, bytes: c.bytes() });

      expect(result).toMatchObject({ type: "rejected", status: c.status, code: c.code });
      if (result.type === "rejected") expect(result.message.length).toBeGreaterThan(10);
      await expectNothingCreated(tenant, filename);
    });
  }
});

describe("createImport: an accepted upload", () => {
  it("creates a queued Job counting the rows, its stored Upload, and a queue job whose id is the Job id", async () => {
    const tenant = tenantFor("accepted");
    const filename = `bank-${randomUUID()}.csv`;
    const bytes = utf8(
      `${HEADER}\n2026-01-01,-1.00,EUR,Rewe,x\n2026-01-02,-2.00,EUR,Aldi,y\n2026-01-03,3.00,EUR,Employer,z\n`,
    );

    const result = await createImport({ tenant, filename, bytes });

    if (result.type !== "created") throw new Error(`rejected: ${result.message}`);
    queueJobs.push(result.jobId);
    expect(result.rows).toBe(3);
    expect(result.progressToken).toMatch(/^[0-9a-f]{32}$/);

    const job = await db().job.findUniqueOrThrow({
      where: { id: result.jobId },
      include: { tenant: true, upload: true, events: true },
    });
    expect(job).toMatchObject({
      kind: "csv_import",
      queue: "imports",
      status: "queued",
      total: 3,
      processed: 0,
      failed: 0,
      cursor: 0,
      attempt: 0,
      progressToken: result.progressToken,
    });
    expect(job.tenant.slug).toBe(tenant);
    expect(job.budgetHardMs).toBeGreaterThan(job.budgetSoftMs);
    expect(job.budgetSource).not.toBe("");
    expect(job.upload).toMatchObject({ filename, delimiter: ",", sizeBytes: bytes.byteLength });
    expect(Buffer.from(job.upload!.content).equals(Buffer.from(bytes))).toBe(true);
    expect(job.events.map((e) => e.type)).toEqual(["created"]);

    const queued = await queue("imports").getJob(result.jobId);
    expect(queued).toBeDefined();
    expect(queued!.id).toBe(result.jobId);
    expect(queued!.name).toBe("csv_import");
    // Readable by queue tools: the row id, kind, tenant and size; never the progress token.
    expect(queued!.data).toMatchObject({ jobId: result.jobId, kind: "csv_import" });
    expect(JSON.stringify(queued!.data)).not.toContain(result.progressToken);
    // The tenant's first open import: the front of the line among fresh jobs (lib/queues/fairness.ts).
    expect(queued!.priority).toBe(2);
    // Under the configured prefix, so a test run never feeds a production worker.
    expect(await redis().exists(`${env().BOUNDED_REDIS_PREFIX}:imports:${result.jobId}`)).toBe(1);
  });

  it("stores the detected delimiter so the worker parses a semicolon file the same way", async () => {
    const tenant = tenantFor("semicolon");
    const result = await createImport({
      tenant,
      filename: "konto.csv",
      bytes: utf8("Datum;date;amount;currency;counterparty;description\n;2026-01-01;-1,50;EUR;Rewe;Einkauf\n"),
    });

    if (result.type !== "created") throw new Error(`rejected: ${result.message}`);
    queueJobs.push(result.jobId);
    const upload = await db().upload.findUniqueOrThrow({ where: { jobId: result.jobId } });
    expect(upload.delimiter).toBe(";");
  });

  it("gives each import of the same tenant its own job and progress token, under one Tenant row", async () => {
    const tenant = tenantFor("twice");
    const bytes = utf8(`${HEADER}\n2026-01-01,-1.00,EUR,Rewe,x\n`);

    const first = await createImport({ tenant, filename: "a.csv", bytes });
    const second = await createImport({ tenant, filename: "a.csv", bytes });

    if (first.type !== "created" || second.type !== "created") throw new Error("rejected");
    queueJobs.push(first.jobId, second.jobId);
    expect(first.jobId).not.toBe(second.jobId);
    expect(first.progressToken).not.toBe(second.progressToken);
    expect(await db().tenant.count({ where: { slug: tenant } })).toBe(1);
    expect(await db().job.count({ where: { tenant: { slug: tenant } } })).toBe(2);
  });

  it("normalises the tenant slug to lower case and strips control characters from the file name", async () => {
    const tenant = tenantFor("case");
    const result = await createImport({
      tenant: `  ${tenant.toUpperCase()} `,
      filename: "bank\u0000\u0007 export.csv",
      bytes: utf8(`${HEADER}\n2026-01-01,-1.00,EUR,Rewe,x\n`),
    });

    if (result.type !== "created") throw new Error(`rejected: ${result.message}`);
    queueJobs.push(result.jobId);
    const job = await db().job.findUniqueOrThrow({
      where: { id: result.jobId },
      include: { tenant: true, upload: true },
    });
    expect(job.tenant.slug).toBe(tenant);
    expect(job.upload!.filename).toBe("bank export.csv");
  });
});

describe("createImport: concurrency", () => {
  it("eight uploads for a new tenant at the same moment all succeed, under one Tenant row", async () => {
    const tenant = tenantFor("concurrent");
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        createImport({ tenant, filename: `c${i}.csv`, bytes: utf8(`${HEADER}\n2026-01-02,-1.00,EUR,REWE,x\n`) }),
      ),
    );
    for (const r of results) {
      expect(r.type).toBe("created");
      if (r.type === "created") queueJobs.push(r.jobId);
    }
    expect(await db().tenant.count({ where: { slug: tenant } })).toBe(1);
    expect(await db().job.count({ where: { tenant: { slug: tenant } } })).toBe(8);
  });
});
