import { parse } from "csv-parse/sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";
import { waitFor } from "@/test/helpers/wait";

// The download routes called as Next.js calls them, on an import run for real (database, queue,
// the model simulator), and the failed rows, fixed, uploaded again.

let h: Awaited<ReturnType<typeof startImportHarness>>;
let routes: {
  result: typeof import("./result.csv/route");
  failed: typeof import("./failed-rows.csv/route");
  progress: typeof import("./route");
  csv: typeof import("@/lib/imports/result-csv");
};
const tenants: string[] = [];

beforeAll(async () => {
  h = await startImportHarness();
  routes = {
    result: await import("./result.csv/route"),
    failed: await import("./failed-rows.csv/route"),
    progress: await import("./route"),
    csv: await import("@/lib/imports/result-csv"),
  };
});

afterAll(async () => {
  for (const slug of tenants) await h.m.tenants.deleteTenant(slug);
  await h.close();
});

const get = (
  handler: { GET: (r: Request, c: { params: Promise<{ token: string }> }) => Promise<Response> },
  token: string,
  file = "",
) => handler.GET(new Request(`http://localhost/api/progress/${token}${file}`), { params: Promise.resolve({ token }) });

/** Uploads a file as the API does and runs its import to the end, as a worker would. */
async function imported(label: string, text: string, filename = `${label}.csv`) {
  const tenant = h.m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  const created = await h.m.createImport.createImport({ tenant, filename, bytes: new TextEncoder().encode(text) });
  if (created.type !== "created") throw new Error(created.message);
  await h.m.queues.queue("imports").remove(created.jobId);
  await h.run(created.jobId);
  const job = await h.m.db.db().job.findUniqueOrThrow({
    where: { id: created.jobId },
    select: { status: true, processed: true, failed: true, total: true },
  });
  return { ...created, job };
}

/** The body's text, after checking it starts with the UTF-8 byte-order mark spreadsheets need (which decoding drops). */
async function textOf(response: Response): Promise<string> {
  const bytes = new Uint8Array(await response.arrayBuffer());
  expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
  return new TextDecoder().decode(bytes);
}

const records = (text: string, delimiter = ",") =>
  parse(text, { bom: true, delimiter, relax_column_count: true }) as string[][];

/** Every kind of cell a CSV writer can get wrong, and rows that fail for different reasons. */
const MIXED = [
  "Date,Amount,Currency,Counterparty,Description,Note",
  '2026-01-05,-12.50,EUR,"Müller, Hans","He said ""hi""",keep',
  "2026-01-06,twelve,EUR,REWE Markt,amount in words,n1",
  '2026-01-07,10.00,EUR,"=HYPERLINK(""http://x"")","two\nlines",n2',
  '2026-02-30,5.00,EUR,@SUM(A1),"comma, inside",n3',
  "2026-01-08,7.00,EUR,REWE Markt",
  '2026-01-09,-3.00,XYZ,Uber,"quote "" and, comma",n5',
  "2026-01-10,+4.00,EUR,-minus start,desc,n6",
].join("\n");

describe("GET /api/progress/:token/result.csv and failed-rows.csv", () => {
  it("the result: every imported row with its category, quoted where needed, formulas made inert, plain numbers left as numbers", async () => {
    const { progressToken, job } = await imported("dl-result", MIXED, "mixed.csv");
    expect(job).toMatchObject({ status: "completed_with_errors", processed: 3, failed: 4 });
    const response = await get(routes.result, progressToken, "/result.csv");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(response.headers.get("content-disposition")).toBe('attachment; filename="mixed-result.csv"');
    const text = await textOf(response);
    expect(text.startsWith("row,date,amount,currency,counterparty,description,category\r\n")).toBe(true);
    // Quotes doubled inside a quoted cell; a line break and a comma keep the cell quoted.
    expect(text).toContain('"Müller, Hans","He said ""hi"""');
    expect(text).toContain('"\'=HYPERLINK(""http://x"")","two\nlines"');
    const rows = records(text);
    const categories = (await h.m.db.db().category.findMany({ select: { name: true } })).map((c) => c.name);
    expect(rows[0]).toEqual(["row", "date", "amount", "currency", "counterparty", "description", "category"]);
    expect(rows.slice(1).map((r) => r.slice(0, 6))).toEqual([
      ["2", "2026-01-05", "-12.50", "EUR", "Müller, Hans", 'He said "hi"'],
      ["4", "2026-01-07", "10.00", "EUR", '\'=HYPERLINK("http://x")', "two\nlines"],
      ["8", "2026-01-10", "4.00", "EUR", "'-minus start", "desc"],
    ]);
    for (const r of rows.slice(1)) expect(categories).toContain(r[6]);
  });

  it("the failed rows: as uploaded (columns, order, header), padded where short, with a reason column; fixed and uploaded again, every row imports", async () => {
    const { progressToken } = await imported("dl-failed", MIXED, "mixed.csv");
    const response = await get(routes.failed, progressToken, "/failed-rows.csv");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-disposition")).toBe('attachment; filename="mixed-failed-rows.csv"');
    const rows = records(await textOf(response));
    expect(rows[0]).toEqual(["Date", "Amount", "Currency", "Counterparty", "Description", "Note", "reason"]);
    const body = rows.slice(1);
    expect(body.map((r) => r.slice(0, 6))).toEqual([
      ["2026-01-06", "twelve", "EUR", "REWE Markt", "amount in words", "n1"],
      ["2026-02-30", "5.00", "EUR", "'@SUM(A1)", "comma, inside", "n3"],
      ["2026-01-08", "7.00", "EUR", "REWE Markt", "", ""],
      ["2026-01-09", "-3.00", "XYZ", "Uber", 'quote " and, comma', "n5"],
    ]);
    expect(body.map((r) => r[6])).toEqual([
      expect.stringMatching(/amount “twelve” is not a number/),
      expect.stringMatching(/not a real calendar date/),
      expect.stringMatching(/row has 4 fields, expected 6/),
      expect.stringMatching(/currency “XYZ” is not one of/),
    ]);

    // What the customer does in a spreadsheet: fix each cell the reason names, keep the reason column, save.
    const fixed = body.map((r) => [...r]);
    fixed[0]![1] = "12.00";
    fixed[1]![0] = "2026-02-28";
    fixed[2]![4] = "was short";
    fixed[3]![2] = "EUR";
    const again = `${rows[0]!.map((c) => c).join(",")}\r\n${fixed.map((r) => routes.csv.csvLine(r)).join("")}`;
    const second = await imported("dl-again", again, "mixed-failed-rows.csv");
    expect(second.job).toMatchObject({ status: "completed", total: 4, processed: 4, failed: 0 });
  });

  it("a semicolon file's failed rows keep the semicolon and decimal commas, and import again once fixed", async () => {
    const text = [
      "date;amount;currency;counterparty;description",
      "2026-01-05;-12,50;EUR;Bäcker;ok",
      "2026-01-06;1.234,56;EUR;;no counterparty",
    ].join("\n");
    const { progressToken } = await imported("dl-semicolon", text);
    const failedText = await textOf(await get(routes.failed, progressToken, "/failed-rows.csv"));
    expect(failedText).toBe(
      "date;amount;currency;counterparty;description;reason\r\n2026-01-06;1.234,56;EUR;;no counterparty;counterparty is empty\r\n",
    );
    const second = await imported(
      "dl-semicolon-again",
      failedText.replace(";;no counterparty", ";Bank;no counterparty"),
    );
    expect(second.job).toMatchObject({ status: "completed", processed: 1, failed: 0 });
  });

  it("a re-upload that still fails gets its reason column rewritten, not a second one", async () => {
    const text = [
      "date,amount,currency,counterparty,description,Reason",
      "2026-01-06,12.00,EUR,,fixed?,amount “twelve” is not a number",
    ].join("\n");
    const { progressToken } = await imported("dl-reason-again", text);
    const rows = records(await textOf(await get(routes.failed, progressToken, "/failed-rows.csv")));
    expect(rows).toEqual([
      ["date", "amount", "currency", "counterparty", "description", "Reason"],
      ["2026-01-06", "12.00", "EUR", "", "fixed?", "counterparty is empty"],
    ]);
  });

  it("streams a page at a time: a file of many rows is never read from the database at once", async () => {
    const lines = ["date,amount,currency,counterparty,description"];
    for (let i = 1; i <= 7; i++)
      lines.push(i % 2 ? `2026-01-0${i},${i}.00,EUR,Shop ${i},row ${i}` : `2026-01-0${i},zero,EUR,Shop ${i},row ${i}`);
    const { jobId } = await imported("dl-pages", lines.join("\n"));
    const chunks = async (stream: ReadableStream<Uint8Array>) => {
      const out: string[] = [];
      for await (const chunk of stream) out.push(new TextDecoder().decode(chunk));
      return out;
    };
    // Pages of 2 rows: the header, then 4 imported rows in 2 pages; 3 failed rows in 2 pages.
    const result = await chunks(await routes.csv.resultCsv(jobId, 2));
    expect(result).toHaveLength(3);
    expect(records(result.join("")).map((r) => r[0])).toEqual(["row", "2", "4", "6", "8"]);
    const failed = await chunks(await routes.csv.failedRowsCsv(jobId, 2));
    expect(failed).toHaveLength(3);
    expect(records(failed.join("")).map((r) => r[4])).toEqual(["description", "row 2", "row 4", "row 6"]);
  });

  it("the progress link is the only key: an unknown or malformed link is a 404, an unfinished import a 409, another kind of job a 404", async () => {
    for (const token of ["0".repeat(32), "not-a-token", "A".repeat(32)]) {
      for (const [handler, file] of [
        [routes.result, "/result.csv"],
        [routes.failed, "/failed-rows.csv"],
      ] as const) {
        const response = await get(handler, token, file);
        expect(response.status, `${token}${file}`).toBe(404);
        expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
      }
    }
    const tenant = h.m.tenants.uniqueTenantSlug("dl-kinds");
    tenants.push(tenant);
    const running = await h.m.jobs.makeJob(tenant, { softMs: 600_000, hardMs: 900_000 });
    const runningRow = await h.m.db
      .db()
      .job.update({ where: { id: running.id }, data: { status: "running" }, select: { progressToken: true } });
    await h.m.db.db().upload.create({
      data: { jobId: running.id, filename: "x.csv", delimiter: ",", sizeBytes: 1, content: Buffer.from("x") },
    });
    const unfinished = await get(routes.result, runningRow.progressToken, "/result.csv");
    expect(unfinished.status).toBe(409);
    expect((await unfinished.json()).error.message).toMatch(/still running/);
    const ocr = await h.m.jobs.makeJob(tenant, {
      kind: "bulk_ocr",
      queue: "documents",
      softMs: 600_000,
      hardMs: 900_000,
    });
    const ocrRow = await h.m.db
      .db()
      .job.update({ where: { id: ocr.id }, data: { status: "completed" }, select: { progressToken: true } });
    expect((await get(routes.failed, ocrRow.progressToken, "/failed-rows.csv")).status).toBe(404);
    // And the progress answer offers no download for it.
    expect((await (await get(routes.progress, ocrRow.progressToken)).json()).downloads).toBeNull();
  });

  it("the progress answer: plain words and the two download links, never the operators' message", async () => {
    const { progressToken, jobId } = await imported("dl-progress", MIXED);
    await h.m.db
      .db()
      .job.update({ where: { id: jobId }, data: { message: "Split by admin into 3 parts; p99 35 s > soft budget" } });
    // The answer is rebuilt when the database announces the change: it follows the row within moments.
    const body = await waitFor(
      async () => {
        const answer = await (await get(routes.progress, progressToken)).json();
        return answer.terminal ? answer : null;
      },
      { timeoutMs: 10_000, what: "the progress answer of the finished import" },
    );
    expect(body.message).toBe("Imported 3 of 7 rows; 4 rows could not be imported (see the list below).");
    expect(body.downloads).toEqual({
      result: `/api/progress/${progressToken}/result.csv`,
      failedRows: `/api/progress/${progressToken}/failed-rows.csv`,
    });
    expect(JSON.stringify(body)).not.toMatch(/split|p99|budget|admin|soft|hard limit|reaper|attempt|cursor|tenant/i);
  });
});
