import http from "node:http";
import { randomUUID } from "node:crypto";
import type { APIRequestContext, APIResponse, Page } from "@playwright/test";
import {
  ACCEPTED_UPLOADS,
  FORMULAS,
  REFUSED_BATCHES,
  REFUSED_UPLOADS,
  formulaCsv,
  type RefusedUpload,
} from "./bad-input-corpus";
import { sql } from "./db";
import { BASE_URL, E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

/** The rows a refused request must not leave behind. */
async function stateCounts() {
  const [row] = await sql<Record<string, string>>(
    `select (select count(*) from "Tenant") tenants, (select count(*) from "Job") jobs, (select count(*) from "Upload") uploads,
            (select count(*) from "JobFile") "jobFiles", (select count(*) from "Transaction") transactions`,
  );
  return row!;
}

/** Imports and OCR batches of earlier tests write rows in the background: wait until they are done. */
async function waitForQuiet() {
  const busy = async () =>
    Number(
      (
        await sql<{ n: string }>(
          `select count(*) n from "Job" where status in ('queued', 'running') and kind in ('csv_import', 'bulk_ocr')`,
        )
      )[0]!.n,
    );
  await expect.poll(busy, { timeout: 60_000, message: "imports and OCR batches still running" }).toBe(0);
}

/** Runs `call` and checks its answer is the JSON error expected, and that no row appeared. */
async function expectRefused(
  call: () => Promise<{ status: number; body: unknown }>,
  expected: { status: number | number[]; code: string | RegExp; message: RegExp },
) {
  const before = await stateCounts();
  const { status, body } = await call();
  expect([expected.status].flat(), `status ${status} (answer: ${JSON.stringify(body).slice(0, 300)})`).toContain(
    status,
  );
  const error = (body as { error?: { code?: unknown; message?: unknown } }).error;
  if (typeof expected.code === "string") expect(error?.code).toBe(expected.code);
  else expect(String(error?.code)).toMatch(expected.code);
  expect(typeof error?.message).toBe("string");
  expect(error?.message).toMatch(expected.message);
  expect(await stateCounts(), "no partial state").toEqual(before);
}

const json = async (r: APIResponse) => ({
  status: r.status(),
  body: await r.json().catch(async () => ({ notJson: (await r.text()).slice(0, 200) })),
});

/**
 * A POST streamed in 64 KB chunks with `Transfer-Encoding: chunked` (no Content-Length). The
 * server refuses an oversized body while it arrives and closes the connection; when that close
 * reaches our next write before its answer is read (EPIPE, ECONNRESET — a race of the sockets, not
 * an answer of the server's), the request is sent again, a few times at most.
 */
async function postChunked(
  path: string,
  contentType: string,
  body: Buffer,
): Promise<{ status: number; body: unknown }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await postChunkedOnce(path, contentType, body);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (attempt >= 3 || (code !== "EPIPE" && code !== "ECONNRESET")) throw err;
    }
  }
}

function postChunkedOnce(path: string, contentType: string, body: Buffer): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    // A connection of its own: the server closes it after refusing the body.
    const req = http.request(
      `${BASE_URL}${path}`,
      { method: "POST", agent: false, headers: { "content-type": contentType, "transfer-encoding": "chunked" } },
      (res) => {
        answered = true;
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
          } catch {
            resolve({ status: res.statusCode ?? 0, body: { notJson: text.slice(0, 200) } });
          }
        });
      },
    );
    // The server may answer 413 and close before the whole body is sent.
    req.on("error", (err) => (answered ? undefined : reject(err)));
    let offset = 0;
    const writeMore = () => {
      while (offset < body.length) {
        const chunk = body.subarray(offset, offset + 64 * 1024);
        offset += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", writeMore);
      }
      req.end();
    };
    writeMore();
  });
}

function multipartBody(tenant: string, filename: string, file: Buffer) {
  const boundary = `----bounded${randomUUID().replaceAll("-", "")}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="tenant"\r\n\r\n${tenant}\r\n`),
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: text/csv\r\n\r\n`,
    ),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

function sendUpload(request: APIRequestContext, c: RefusedUpload, tenant: string) {
  const file = c.body();
  switch (c.transport) {
    case "multipart":
      return request
        .post("/api/imports", { multipart: { tenant, file: { name: "bad.csv", mimeType: "text/csv", buffer: file } } })
        .then(json);
    case "raw":
      return request
        .post(`/api/imports?tenant=${tenant}`, { data: file, headers: { "content-type": "text/csv" } })
        .then(json);
    case "chunked":
      return postChunked(`/api/imports?tenant=${tenant}`, "text/csv", file);
    case "chunked-multipart": {
      const m = multipartBody(tenant, "bad.csv", file);
      return postChunked("/api/imports", m.contentType, m.body);
    }
  }
}

test.beforeAll(async () => {
  test.setTimeout(90_000);
  await waitForQuiet();
});

test.describe("malformed CSV uploads are refused whole, with a reason", () => {
  expect(REFUSED_UPLOADS.length + REFUSED_BATCHES.length).toBeGreaterThanOrEqual(30);
  for (const [i, c] of REFUSED_UPLOADS.entries()) {
    test(`${c.name} (${c.transport}) → ${c.status} ${c.code}`, async ({ request }) => {
      await expectRefused(() => sendUpload(request, c, `e2e-bad-${i}`), c);
    });
  }
});

test.describe("malformed document batches are refused whole, naming the file", () => {
  for (const [i, c] of REFUSED_BATCHES.entries()) {
    test(`${c.name} → ${c.status} ${c.code}`, async ({ request }) => {
      const tenant = `e2e-bad-docs-${i}`;
      const multipart: Record<string, string | { name: string; mimeType: string; buffer: Buffer }> = { tenant };
      await expectRefused(async () => {
        if (c.files === "none") return json(await request.post("/api/documents", { multipart }));
        if (c.files === "text-field")
          return json(await request.post("/api/documents", { multipart: { ...multipart, files: "not a file" } }));
        // Playwright's `multipart` takes one value per name: several files need a FormData.
        const form = new FormData();
        form.append("tenant", tenant);
        for (const f of c.files)
          form.append("files", new Blob([new Uint8Array(f.buffer)], { type: f.mimeType }), f.name);
        return json(await request.post("/api/documents", { multipart: form }));
      }, c);
    });
  }
});

test("requests that are not an upload at all get a 4xx that says what to send", async ({ request }) => {
  const csv = Buffer.from("date,amount,currency,counterparty,description\n2026-01-05,-1.00,EUR,A,B\n");
  const file = { name: "a.csv", mimeType: "text/csv", buffer: csv };
  const cases: [
    string,
    () => Promise<{ status: number; body: unknown }>,
    { status: number; code: string; message: RegExp },
  ][] = [
    [
      "JSON instead of a file",
      async () => json(await request.post("/api/imports", { data: { tenant: "e2e-bad-json" } })),
      { status: 415, code: "unsupported_media_type", message: /multipart\/form-data/ },
    ],
    [
      "no content type",
      async () =>
        json(await request.post("/api/imports?tenant=e2e-bad-ct", { data: csv, headers: { "content-type": "" } })),
      { status: 415, code: "unsupported_media_type", message: /text\/csv body/ },
    ],
    [
      "a form without the file",
      async () => json(await request.post("/api/imports", { multipart: { tenant: "e2e-bad-nofile" } })),
      { status: 422, code: "file_missing", message: /Choose a CSV file/ },
    ],
    [
      "the file as a text field",
      async () =>
        json(await request.post("/api/imports", { multipart: { tenant: "e2e-bad-textfile", file: csv.toString() } })),
      { status: 422, code: "file_missing", message: /Choose a CSV file/ },
    ],
    [
      "a form without a tenant",
      async () => json(await request.post("/api/imports", { multipart: { file } })),
      { status: 422, code: "invalid_request", message: /— tenant is required\.$/ },
    ],
    [
      "a path as the tenant",
      async () => json(await request.post("/api/imports", { multipart: { tenant: "../../etc", file } })),
      { status: 422, code: "invalid_request", message: /tenant must be/ },
    ],
    [
      "a multipart body that does not match its boundary",
      async () =>
        json(
          await request.post("/api/imports", {
            data: Buffer.from("--other\r\nnonsense"),
            headers: { "content-type": "multipart/form-data; boundary=expected" },
          }),
        ),
      { status: 400, code: "bad_multipart", message: /form data could not be read/ },
    ],
    [
      "a multipart type without a boundary",
      async () =>
        json(
          await request.post("/api/documents", {
            data: Buffer.from("x"),
            headers: { "content-type": "multipart/form-data" },
          }),
        ),
      { status: 400, code: "bad_multipart", message: /form data could not be read/ },
    ],
    [
      "documents as JSON",
      async () => json(await request.post("/api/documents", { data: { tenant: "e2e-bad-docjson", files: [] } })),
      { status: 415, code: "unsupported_media_type", message: /multipart\/form-data/ },
    ],
  ];
  for (const [name, call, expected] of cases) await test.step(name, () => expectRefused(call, expected));
});

const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
const HUGE_JSON = JSON.stringify({ tenant: "e2e-bad-huge", pad: "x".repeat(2 * 1024 * 1024) });

/** Every JSON route that takes a body: the same bad bodies, each a 4xx naming the problem. */
const JSON_ROUTES: {
  path: () => string;
  wrongTypes: unknown;
  wrongTypesMessage: RegExp;
  unknownField: unknown;
}[] = [
  {
    path: () => `/api/jobs/${randomUUID()}/retry`,
    wrongTypes: { budgetSoftS: "lots" },
    wrongTypesMessage: /budgetSoftS/,
    unknownField: { budgetSoftS: 1200, force: true },
  },
  {
    path: () => `/api/jobs/${randomUUID()}/split`,
    wrongTypes: { parts: "eight" },
    wrongTypesMessage: /parts/,
    unknownField: { parts: 4, everything: true },
  },
  {
    path: () => "/api/jobs/retry",
    wrongTypes: { filter: { status: "exploded" }, dryRun: "yes" },
    wrongTypesMessage: /filter\.status|dryRun/,
    unknownField: { filter: {}, dryRun: true, all: true },
  },
  {
    path: () => "/api/agent-runs",
    wrongTypes: { tenant: "e2e-bad-agent", task: "t", steps: "ten" },
    wrongTypesMessage: /steps/,
    unknownField: { tenant: "e2e-bad-agent", task: "t", steps: 2, admin: true },
  },
  {
    path: () => "/api/syncs",
    wrongTypes: { tenant: 42, family: "everything" },
    wrongTypesMessage: /tenant|family/,
    unknownField: { tenant: "e2e-bad-sync", family: "orders", priority: 1 },
  },
  {
    path: () => "/api/generations",
    wrongTypes: { tenant: "e2e-bad-gen", adId: 7, kind: "generate" },
    wrongTypesMessage: /adId/,
    unknownField: { tenant: "e2e-bad-gen", adId: randomUUID(), kind: "generate", free: true },
  },
];

for (const r of JSON_ROUTES) {
  const name = r.path().replace(/[0-9a-f-]{36}/, "[id]");
  test(`POST ${name}: bad JSON, wrong types, unknown fields, a 2 MB body, a form body → 4xx with the reason`, async ({
    request,
  }) => {
    // Bytes, so the client sends them as they are (a string would be JSON-encoded).
    const post = async (text: string, contentType = "application/json") =>
      json(
        await request.post(r.path(), {
          data: Buffer.from(text),
          headers: { ...operator, "content-type": contentType },
        }),
      );
    await test.step("bad JSON", () =>
      expectRefused(() => post('{"tenant": "x",'), { status: 400, code: "bad_json", message: /not valid JSON/ }));
    await test.step("wrong types", () =>
      expectRefused(() => post(JSON.stringify(r.wrongTypes)), {
        status: 422,
        code: "invalid_request",
        message: r.wrongTypesMessage,
      }));
    await test.step("unknown fields", () =>
      expectRefused(() => post(JSON.stringify(r.unknownField)), {
        status: 422,
        code: "invalid_request",
        message: /[Uu]nrecognized key/,
      }));
    await test.step("a JSON array", () =>
      expectRefused(() => post("[1,2,3]"), { status: 422, code: "invalid_request", message: /expected object/ }));
    await test.step("a 2 MB body", () =>
      expectRefused(() => post(HUGE_JSON), { status: 413, code: "body_too_large", message: /the limit is 64\.0 KB/ }));
    // A form body is not JSON: refused as such, or for its type.
    await test.step("a form body", () =>
      expectRefused(() => post("tenant=x&family=orders", "application/x-www-form-urlencoded"), {
        status: [400, 415],
        code: /^(bad_json|unsupported_media_type)$/,
        message: /JSON/,
      }));
  });
}

test("bad ids and bad query parameters get a 404 or 422 with a message, never a 500", async ({ request }) => {
  const get = async (path: string) => json(await request.get(path, { headers: operator }));
  const post = async (path: string) => json(await request.post(path, { headers: operator, data: {} }));
  const cases: [
    string,
    () => Promise<{ status: number; body: unknown }>,
    { status: number; code: string; message: RegExp },
  ][] = [
    [
      "GET /api/jobs/not-a-uuid",
      () => get("/api/jobs/not-a-uuid"),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "GET /api/jobs/<unknown uuid>",
      () => get(`/api/jobs/${randomUUID()}`),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "GET /api/jobs/<SQL>",
      () => get(`/api/jobs/${encodeURIComponent("1' or '1'='1")}`),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "POST /api/jobs/not-a-uuid/retry",
      () => post("/api/jobs/not-a-uuid/retry"),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "POST /api/jobs/<unknown uuid>/retry",
      () => post(`/api/jobs/${randomUUID()}/retry`),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "POST /api/jobs/not-a-uuid/split",
      () => post("/api/jobs/not-a-uuid/split"),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "POST /api/jobs/<unknown uuid>/split",
      () => post(`/api/jobs/${randomUUID()}/split`),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "GET /api/jobs/not-a-uuid/split-plan",
      () => get("/api/jobs/not-a-uuid/split-plan"),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "GET /api/jobs/<unknown uuid>/split-plan",
      () => get(`/api/jobs/${randomUUID()}/split-plan`),
      { status: 404, code: "not_found", message: /No job with this id/ },
    ],
    [
      "GET split-plan?parts=many",
      () => get(`/api/jobs/${randomUUID()}/split-plan?parts=many`),
      { status: 422, code: "invalid_request", message: /parts/ },
    ],
    [
      "GET split-plan?parts=1000",
      () => get(`/api/jobs/${randomUUID()}/split-plan?parts=1000`),
      { status: 422, code: "invalid_request", message: /parts.*At most 50/ },
    ],
    [
      "GET /api/progress/not-a-token",
      () => get("/api/progress/not-a-token"),
      { status: 404, code: "not_found", message: /No job has this progress link/ },
    ],
    [
      "GET /api/progress/<unknown token>",
      () => get(`/api/progress/${"0".repeat(32)}`),
      { status: 404, code: "not_found", message: /No job has this progress link/ },
    ],
    [
      "POST /api/jobs/retry with an empty body",
      () => post("/api/jobs/retry"),
      { status: 422, code: "invalid_request", message: /filter/ },
    ],
    [
      "GET /api/jobs?status=exploded",
      () => get("/api/jobs?status=exploded"),
      { status: 422, code: "invalid_request", message: /status/ },
    ],
    [
      "GET /api/jobs?after=not-a-uuid",
      () => get("/api/jobs?after=not-a-uuid"),
      { status: 422, code: "invalid_request", message: /after/ },
    ],
    [
      "GET /api/jobs?limit=-5",
      () => get("/api/jobs?limit=-5"),
      { status: 422, code: "invalid_request", message: /limit/ },
    ],
    [
      "GET /api/jobs?limit=1e9",
      () => get("/api/jobs?limit=1e9"),
      { status: 422, code: "invalid_request", message: /limit/ },
    ],
    [
      "GET /api/model-calls/histogram?range=forever",
      () => get("/api/model-calls/histogram?range=forever"),
      { status: 422, code: "invalid_request", message: /range/ },
    ],
    [
      "GET /api/model-calls/histogram?type=sql",
      () => get("/api/model-calls/histogram?type=sql"),
      { status: 422, code: "invalid_request", message: /type/ },
    ],
    [
      "GET /api/limiter?range=1y",
      () => get("/api/limiter?range=1y"),
      { status: 422, code: "invalid_request", message: /range/ },
    ],
  ];
  for (const [name, call, expected] of cases) await test.step(name, () => expectRefused(call, expected));
});

test.describe("odd but valid files are accepted", () => {
  for (const c of ACCEPTED_UPLOADS) {
    test(`${c.name} → 201 with ${c.rows} rows`, async ({ request }) => {
      const response = await request.post("/api/imports", {
        multipart: { tenant: "e2e-odd-valid", file: { name: "odd.csv", mimeType: "text/csv", buffer: c.body() } },
      });
      expect(response.status(), await response.text()).toBe(201);
      expect((await response.json()).rows).toBe(c.rows);
    });
  }
});

test("spreadsheet formulas are imported as text and shown inert on the progress and job pages", async ({
  request,
  page,
  signIn,
}) => {
  const { csv, failingRows } = formulaCsv();
  const created = await request.post("/api/imports", {
    multipart: { tenant: "e2e-formulas", file: { name: "formulas.csv", mimeType: "text/csv", buffer: csv } },
  });
  expect(created.status(), await created.text()).toBe(201);
  const { jobId, progressToken } = await created.json();
  await expect
    .poll(async () => (await (await request.get(`/api/progress/${progressToken}`)).json()).status, { timeout: 60_000 })
    .toBe("completed_with_errors");

  // The text cells are stored as the characters sent, never evaluated or rewritten.
  const stored = await sql<{ counterparty: string; description: string }>(
    `select counterparty, description from "Transaction" where "jobId" = $1 order by row`,
    [jobId],
  );
  expect(stored.map((t) => t.counterparty)).toEqual([...FORMULAS]);
  expect(stored.map((t) => t.description)).toEqual([...FORMULAS]);

  const progress = await (await request.get(`/api/progress/${progressToken}`)).json();
  expect(progress.failures.map((f: { row: number }) => f.row)).toEqual(failingRows.map((f) => f.row));

  const checkInert = async (table: ReturnType<Page["locator"]>) => {
    for (const f of failingRows) await expect(table.getByRole("row").filter({ hasText: f.shown })).toHaveCount(1);
    // Text, never markup: no link, no element made from the cell.
    await expect(table.locator("a")).toHaveCount(0);
    await expect(page.locator('a[href^="http://x"]')).toHaveCount(0);
  };
  await page.goto(`/progress/${progressToken}`);
  await checkInert(page.getByTestId("failures"));
  await signIn("operator");
  await page.goto(`/jobs/${jobId}`);
  await checkInert(page.locator("table").filter({ hasText: failingRows[0]!.shown }));
});
