import type { APIRequestContext } from "@playwright/test";
import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

const MAX_BYTES = Number(E2E_ENV.BOUNDED_UPLOAD_MAX_BYTES);
const MAX_ROWS = Number(E2E_ENV.BOUNDED_UPLOAD_MAX_ROWS);

async function upload(request: APIRequestContext, tenant: string, name: string, buffer: Buffer) {
  return request.post("/api/imports", { multipart: { tenant, file: { name, mimeType: "text/csv", buffer } } });
}

const uploadCount = async () => Number((await sql<{ n: string }>(`select count(*) n from "Upload"`))[0]!.n);

/** Nothing may be left behind by a rejected upload: no tenant, no job, no stored file. */
async function expectNothingCreated(tenant: string, uploadsBefore: number) {
  const [row] = await sql<{ tenants: string; jobs: string }>(
    `select (select count(*) from "Tenant" where slug = $1) tenants,
            (select count(*) from "Job" j join "Tenant" t on t.id = j."tenantId" where t.slug = $1) jobs`,
    [tenant],
  );
  expect(row).toEqual({ tenants: "0", jobs: "0" });
  expect(await uploadCount()).toBe(uploadsBefore);
}

const header = "date,amount,currency,counterparty,description\n";
const cases: { name: string; status: number; code: string; body: () => Buffer; message: RegExp }[] = [
  {
    name: "too large",
    status: 413,
    code: "file_too_large",
    body: () => Buffer.from(header + "2026-01-01,1.00,EUR,A,B\n".repeat(Math.ceil((MAX_BYTES + 10) / 24))),
    message: new RegExp(`the limit is ${(MAX_BYTES / 1024 / 1024).toFixed(1)} MB`),
  },
  {
    name: "too many rows",
    status: 413,
    code: "too_many_rows",
    body: () => Buffer.from(transactionsCsv(MAX_ROWS + 1).csv),
    message: new RegExp(`rows; the limit is ${MAX_ROWS.toLocaleString("en-US")}`),
  },
  {
    name: "not text (a PNG)",
    status: 415,
    code: "not_text",
    body: () => Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]),
    message: /binary data/,
  },
  {
    name: "UTF-16",
    status: 415,
    code: "not_text",
    body: () => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(header, "utf16le")]),
    message: /UTF-16/,
  },
  {
    name: "not UTF-8 (Latin-1)",
    status: 415,
    code: "not_utf8",
    body: () => Buffer.from(`${header}2026-01-01,1.00,EUR,M\xfcller,B\n`, "latin1"),
    message: /not valid UTF-8/,
  },
  { name: "empty", status: 422, code: "empty_file", body: () => Buffer.alloc(0), message: /The file is empty/ },
  { name: "header only", status: 422, code: "no_rows", body: () => Buffer.from(header), message: /no transactions/ },
  {
    name: "missing columns",
    status: 422,
    code: "missing_columns",
    body: () => Buffer.from("date,amount,payee\n2026-01-01,1.00,A\n"),
    message: /Missing required columns: currency, counterparty, description/,
  },
  {
    name: "wrong delimiter (tabs)",
    status: 422,
    code: "wrong_delimiter",
    body: () => Buffer.from(`${header.replaceAll(",", "\t")}2026-01-01\t1.00\tEUR\tA\tB\n`),
    message: /separated by tabs/,
  },
  {
    name: "unbalanced quote",
    status: 422,
    code: "malformed_csv",
    body: () => Buffer.from(`${header}2026-01-01,1.00,EUR,"A,B\n2026-01-02,1.00,EUR,C,D\n`),
    message: /not well-formed CSV/,
  },
];

for (const c of cases) {
  test(`an upload that is ${c.name} is refused with ${c.status} and leaves no row behind`, async ({ request }) => {
    const tenant = `e2e-reject-${c.code.replaceAll("_", "-")}-${c.status}-${cases.indexOf(c)}`;
    const uploadsBefore = await uploadCount();
    const response = await upload(request, tenant, `${c.code}.csv`, c.body());
    expect(response.status()).toBe(c.status);
    const body = await response.json();
    expect(body.error.code).toBe(c.code);
    expect(body.error.message).toMatch(c.message);
    await expectNothingCreated(tenant, uploadsBefore);
  });
}

test("bad API calls get a 4xx with a message, never a 500", async ({ request }) => {
  const uploadsBefore = await uploadCount();
  const noTenant = await request.post("/api/imports", {
    multipart: { file: { name: "a.csv", mimeType: "text/csv", buffer: Buffer.from(transactionsCsv(2).csv) } },
  });
  expect(noTenant.status()).toBe(422);
  expect((await noTenant.json()).error.issues[0].message).toMatch(/tenant/);
  const noFile = await request.post("/api/imports", { multipart: { tenant: "e2e-nofile" } });
  expect(noFile.status()).toBe(422);
  const json = await request.post("/api/imports", { data: { tenant: "x" } });
  expect(json.status()).toBe(415);
  const badTenant = await upload(request, "../../etc", "a.csv", Buffer.from(transactionsCsv(2).csv));
  expect(badTenant.status()).toBe(422);
  expect((await upload(request, "system", "a.csv", Buffer.from(transactionsCsv(2).csv))).status()).toBe(422);
  await expectNothingCreated("e2e-nofile", uploadsBefore);
});

test("the upload page shows a rejection in words a person understands", async ({ page }) => {
  const uploadsBefore = await uploadCount();
  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill("e2e-reject-page");
  await page.getByLabel("Bank transactions (CSV)").setInputFiles({
    name: "payees.csv",
    mimeType: "text/csv",
    buffer: Buffer.from("date;amount;payee\n2026-01-01;1,00;A\n"),
  });
  await page.getByRole("button", { name: "Upload and import" }).click();
  await expect(page.locator("p.form-error")).toContainText(
    "Missing required columns: currency, counterparty, description",
  );
  await expect(page).toHaveURL(/\/upload$/);
  await page.screenshot({ path: "test-results/upload-rejected.png", fullPage: true });
  await expectNothingCreated("e2e-reject-page", uploadsBefore);
});
