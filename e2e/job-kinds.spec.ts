import { randomUUID } from "node:crypto";
import type { APIRequestContext } from "@playwright/test";
import { samplePdf, samplePng, sampleText, truncatedPdf } from "../lib/documents/sample-documents";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

/**
 * The job kinds beside the CSV import — bulk_ocr, agent_run, overdue_invoices — through their
 * start routes and the workers, against the running system. Budgets are production time × the
 * e2e time scale while database work is not scaled: a batch here must fit the documents and
 * agent-batch budgets at that scale (a sweep that runs out is simply followed by another).
 */

const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
const unique = (label: string) => `e2e-${label}-${randomUUID().slice(0, 8)}`;

interface ProgressBody {
  status: string;
  terminal: boolean;
  processed: number;
  failed: number;
  message: string | null;
  failures: { row: number; reason: string }[];
}

async function finished(request: APIRequestContext, progressUrl: string): Promise<ProgressBody> {
  let last: ProgressBody | undefined;
  await expect
    .poll(
      async () => {
        last = (await (await request.get(`/api${progressUrl}`)).json()) as ProgressBody;
        return last.terminal;
      },
      { intervals: [200], timeout: 60_000 },
    )
    .toBe(true);
  return last!;
}

/** Nothing may be left behind by a refused request: no tenant, no job. */
async function expectNothingCreated(tenant: string) {
  const [row] = await sql<{ tenants: string; jobs: string }>(
    `select (select count(*) from "Tenant" where slug = $1) tenants,
            (select count(*) from "Job" j join "Tenant" t on t.id = j."tenantId" where t.slug = $1) jobs`,
    [tenant],
  );
  expect(row).toEqual({ tenants: "0", jobs: "0" });
}

test.describe("bulk_ocr: POST /api/documents and /documents", () => {
  test("a batch with one damaged scan ends completed_with_errors, naming file 3", async ({ request }) => {
    const tenant = unique("docs");
    // Several files under one field name: posted as FormData.
    const form = new FormData();
    form.set("tenant", tenant);
    for (const [name, bytes] of [
      ["invoice.pdf", samplePdf()],
      ["receipt.png", samplePng()],
      ["scan-3.pdf", truncatedPdf()],
      ["lease.txt", sampleText()],
    ] as const) {
      form.append("files", new Blob([Buffer.from(bytes)]), name);
    }
    const batch = await request.post("/api/documents", { multipart: form });
    expect(batch.status()).toBe(201);
    const body = (await batch.json()) as { jobId: string; progressUrl: string; files: number };
    expect(body.files).toBe(4);

    const progress = await finished(request, body.progressUrl);
    expect(progress).toMatchObject({ status: "completed_with_errors", processed: 3, failed: 1 });
    expect(progress.message).toBe("Read 3 of 4 documents; 1 document could not be read (see the list below).");
    expect(progress.failures).toEqual([
      { row: 3, reason: "scan-3.pdf: could not be read: the PDF is damaged (it ends before its end-of-file marker)" },
    ]);
    const files = await sql<{ index: number; has_text: boolean; has_summary: boolean }>(
      `select index, text is not null has_text, summary is not null has_summary from "JobFile" where "jobId" = $1 order by index`,
      [body.jobId],
    );
    expect(files).toEqual([
      { index: 1, has_text: true, has_summary: true },
      { index: 2, has_text: true, has_summary: true },
      { index: 3, has_text: false, has_summary: false },
      { index: 4, has_text: true, has_summary: true },
    ]);
    const [calls] = await sql<{ ocr: string; model: string }>(
      `select count(*) filter (where type = 'ocr') ocr, count(*) filter (where type = 'model') model from "ModelCall" where "jobId" = $1`,
      [body.jobId],
    );
    expect(Number(calls!.ocr)).toBeGreaterThanOrEqual(4);
    expect(Number(calls!.model)).toBeGreaterThanOrEqual(3);
  });

  const refusals: { name: string; files: [string, Uint8Array][]; status: number; code: string; message: RegExp }[] = [
    {
      name: "a Word document",
      files: [
        ["a.pdf", samplePdf()],
        ["b.docx", Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0, 0])],
      ],
      status: 415,
      code: "unsupported_type",
      message: /File 2 \(“b\.docx”\) is a Word or Excel document/,
    },
    {
      name: "an empty file",
      files: [["empty.png", new Uint8Array(0)]],
      status: 422,
      code: "empty_file",
      message: /File 1 \(“empty\.png”\) is empty/,
    },
    {
      name: "96 files",
      files: Array.from({ length: 96 }, (_, i) => [`${i}.txt`, sampleText(`note ${i}`)]),
      status: 413,
      code: "too_many_files",
      message: /the limit is 95/,
    },
  ];
  for (const r of refusals) {
    test(`a batch with ${r.name} is refused with ${r.status} and leaves nothing behind`, async ({ request }) => {
      const tenant = unique("docs-refused");
      const form = new FormData();
      form.set("tenant", tenant);
      for (const [name, bytes] of r.files) form.append("files", new Blob([Buffer.from(bytes)]), name);
      const response = await request.post("/api/documents", { multipart: form });
      expect(response.status()).toBe(r.status);
      const body = await response.json();
      expect(body.error.code).toBe(r.code);
      expect(body.error.message).toMatch(r.message);
      await expectNothingCreated(tenant);
    });
  }

  test("the /documents page uploads a batch and leads to its progress page", async ({ page }) => {
    const tenant = unique("docs-page");
    await page.goto("/documents");
    await page.getByLabel("Your account (tenant)").fill(tenant);
    await page.getByLabel("Documents").setInputFiles([
      { name: "note.txt", mimeType: "text/plain", buffer: Buffer.from(sampleText("Meeting notes, 3 March")) },
      { name: "receipt.png", mimeType: "image/png", buffer: Buffer.from(samplePng()) },
    ]);
    await page.getByRole("button", { name: "Upload and read" }).click();
    await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
    await expect(page.locator("main [data-status]")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
    await expect(page.getByTestId("message")).toHaveText("Read all 2 documents.");
  });

  test("the /documents page shows a refusal in words", async ({ page }) => {
    const tenant = unique("docs-page-refused");
    await page.goto("/documents");
    await page.getByLabel("Your account (tenant)").fill(tenant);
    await page.getByLabel("Documents").setInputFiles({
      name: "slides.pptx",
      mimeType: "application/octet-stream",
      buffer: Buffer.from([0x50, 0x4b, 0x03, 0x04, 0, 0]),
    });
    await page.getByRole("button", { name: "Upload and read" }).click();
    await expect(page.locator("p.form-error")).toContainText(
      "File 1 (“slides.pptx”) is a Word or Excel document or a ZIP archive",
    );
    await expect(page).toHaveURL(/\/documents$/);
    await expectNothingCreated(tenant);
  });
});

test.describe("agent_run: POST /api/agent-runs (operator)", () => {
  test("refuses anonymous and unknown-token callers with 401", async ({ request }) => {
    const tenant = unique("agent-anon");
    const anonymous = await request.post("/api/agent-runs", { data: { tenant, task: "Convert 5 USD", steps: 2 } });
    expect(anonymous.status()).toBe(401);
    expect((await anonymous.json()).error.code).toBe("unauthenticated");
    const wrong = await request.post("/api/agent-runs", {
      data: { tenant, task: "Convert 5 USD", steps: 2 },
      headers: { authorization: "Bearer bnd_not-a-real-token-at-all" },
    });
    expect(wrong.status()).toBe(401);
    await expectNothingCreated(tenant);
  });

  test("refuses bad fields with 422 and the issues, creating nothing", async ({ request }) => {
    const tenant = unique("agent-bad");
    for (const [data, path] of [
      [{ tenant, task: "x", steps: 0 }, "steps"],
      [{ tenant, task: "x", steps: 51 }, "steps"],
      [{ tenant, task: "", steps: 3 }, "task"],
      [{ tenant: "../etc", task: "x", steps: 3 }, "tenant"],
    ] as const) {
      const response = await request.post("/api/agent-runs", { data, headers: operator });
      expect(response.status()).toBe(422);
      const body = await response.json();
      expect(body.error.code).toBe("invalid_request");
      expect(body.error.issues[0].path).toBe(path);
    }
    const text = await request.post("/api/agent-runs", {
      data: "task=x",
      headers: { ...operator, "content-type": "text/plain" },
    });
    expect(text.status()).toBe(415);
    await expectNothingCreated(tenant);
  });

  test("a batch run finishes with its answer in the result; an interactive run goes to agent-interactive", async ({
    request,
  }) => {
    const tenant = unique("agent");
    const created = await request.post("/api/agent-runs", {
      data: { tenant, task: "Convert 120 USD and 80 GBP to EUR", steps: 3 },
      headers: operator,
    });
    expect(created.status()).toBe(201);
    const run = await created.json();
    expect(run.queue).toBe("agent-batch");
    const progress = await finished(request, run.progressUrl);
    expect(progress).toMatchObject({ status: "completed", processed: 3, failed: 0, message: "Finished all 3 steps." });
    const [job] = await sql<{ answer: string }>(`select result->>'answer' answer from "Job" where id = $1`, [
      run.jobId,
    ]);
    expect(job!.answer).toContain("3 of 3 steps done");
    expect(job!.answer).toContain("120.00 USD ≈ 111.11 EUR");
    const tools = await sql<{ model: string; n: string }>(
      `select model, count(*) n from "ModelCall" where "jobId" = $1 and type = 'tool' group by model order by model`,
      [run.jobId],
    );
    expect(tools).toEqual([
      { model: "convert_amount", n: "2" },
      { model: "format_line", n: "1" },
      { model: "lookup_rate", n: "3" },
    ]);

    const interactive = await request.post("/api/agent-runs", {
      data: { tenant, task: "Convert 5 CHF", steps: 1, interactive: true },
      headers: operator,
    });
    expect(interactive.status()).toBe(201);
    const i = await interactive.json();
    expect(i.queue).toBe("agent-interactive");
    const [row] = await sql<{ queue: string; kind: string }>(`select queue, kind from "Job" where id = $1`, [i.jobId]);
    expect(row).toEqual({ queue: "agent-interactive", kind: "agent_run" });
  });
});

test.describe("overdue_invoices: POST /api/sweeps/overdue-invoices (operator)", () => {
  test("refuses anonymous callers with 401", async ({ request }) => {
    const response = await request.post("/api/sweeps/overdue-invoices");
    expect(response.status()).toBe(401);
  });

  test("a sweep marks the due invoices overdue and records the poisoned one as its row's failure", async ({
    request,
  }) => {
    const tenant = unique("sweep");
    const prefix = `E2E-${randomUUID().slice(0, 6)}`;
    await sql(`insert into "Tenant" (id, slug) values (gen_random_uuid(), $1)`, [tenant]);
    await sql(
      `insert into "Invoice" (id, "tenantId", number, "amountMinor", currency, "dueDate", status)
       select gen_random_uuid(), t.id, $2 || '-' || n, 1000 + n, case when n = 4 then 'XYZ' else 'EUR' end, current_date - (10 + n), 'open'
       from "Tenant" t, generate_series(1, 6) n where t.slug = $1`,
      [tenant, prefix],
    );

    // A scheduled sweep may have picked these up already (409): either way they end up swept.
    const started = await request.post("/api/sweeps/overdue-invoices", { headers: operator });
    expect([201, 409]).toContain(started.status());
    if (started.status() === 409) expect((await started.json()).error.code).toBe("sweep_running");

    // A sweep that ran out of its budget leaves the rest open and due: the next one takes them.
    await expect
      .poll(
        async () => {
          const [{ n }] = (await sql<{ n: string }>(
            `select count(*) n from "Invoice" where number like $1 and status = 'overdue'`,
            [`${prefix}-%`],
          )) as [{ n: string }];
          if (n !== "5")
            expect([201, 409]).toContain(
              (await request.post("/api/sweeps/overdue-invoices", { headers: operator })).status(),
            );
          return n;
        },
        { intervals: [500], timeout: 60_000 },
      )
      .toBe("5");
    const [poisoned] = await sql<{ status: string; reminder: string | null }>(
      `select status, reminder from "Invoice" where number = $1`,
      [`${prefix}-4`],
    );
    expect(poisoned).toEqual({ status: "open", reminder: null });
    const [reminder] = await sql<{ reminder: string; overdue: boolean }>(
      `select reminder, "overdueAt" is not null overdue from "Invoice" where number = $1`,
      [`${prefix}-1`],
    );
    expect(reminder!.overdue).toBe(true);
    expect(reminder!.reminder).toMatch(
      new RegExp(`^Invoice ${prefix}-1 for 10\\.01 EUR was due on .* and is \\d+ days overdue\\.`),
    );
    await expect
      .poll(
        async () =>
          (await sql(`select 1 from "JobItemFailure" where reason like $1`, [`invoice ${prefix}-4: currency “XYZ”%`]))
            .length,
        { timeout: 30_000 },
      )
      .toBeGreaterThan(0);
  });
});
