import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { samplePdf, samplePng, sampleText } from "@/lib/documents/sample-documents";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { POST } from "./route";

// The public upload route called as Next.js calls it: a Request in, a Response out. (Routes that
// need a signed-in caller read next/headers, which only exists inside a real request: those are
// covered by e2e/job-kinds.spec.ts.)

const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

function form(tenant: string | null, files: [string, Uint8Array][]): FormData {
  const body = new FormData();
  if (tenant !== null) body.set("tenant", tenant);
  for (const [name, bytes] of files) body.append("files", new File([bytes as Uint8Array<ArrayBuffer>], name));
  return body;
}

const post = (body: FormData | string, headers: Record<string, string> = {}) =>
  POST(new Request("http://localhost/api/documents", { method: "POST", body, headers }), {});

async function nothingCreated(tenant: string) {
  expect(await db().tenant.findUnique({ where: { slug: tenant } })).toBeNull();
}

describe("POST /api/documents", () => {
  it("creates a bulk_ocr job with one JobFile per document → 201 with the progress link", async () => {
    const tenant = uniqueTenantSlug("api-docs");
    tenants.push(tenant);
    const response = await post(
      form(tenant, [
        ["a.pdf", samplePdf()],
        ["b.png", samplePng()],
        ["c.txt", sampleText()],
      ]),
    );

    expect(response.status).toBe(201);
    const body = (await response.json()) as {
      jobId: string;
      progressToken: string;
      progressUrl: string;
      files: number;
    };
    expect(body).toMatchObject({ files: 3, progressUrl: `/progress/${body.progressToken}` });
    expect(response.headers.get("location")).toBe(body.progressUrl);
    await queue("documents").remove(body.jobId);
    const job = await db().job.findUniqueOrThrow({
      where: { id: body.jobId },
      select: {
        kind: true,
        queue: true,
        total: true,
        status: true,
        files: {
          select: { index: true, filename: true, contentType: true, sizeBytes: true },
          orderBy: { index: "asc" },
        },
      },
    });
    expect(job).toEqual({
      kind: "bulk_ocr",
      queue: "documents",
      total: 3,
      status: "queued",
      files: [
        { index: 1, filename: "a.pdf", contentType: "application/pdf", sizeBytes: samplePdf().length },
        { index: 2, filename: "b.png", contentType: "image/png", sizeBytes: samplePng().length },
        { index: 3, filename: "c.txt", contentType: "text/plain", sizeBytes: sampleText().length },
      ],
    });
  });

  it.each([
    [
      "an unsupported file",
      [
        ["a.pdf", samplePdf()],
        ["b.docx", Uint8Array.from([0x50, 0x4b, 0x03, 0x04])],
      ],
      415,
      "unsupported_type",
      /^File 2 \(“b\.docx”\) is a Word or Excel document/,
    ],
    [
      "an empty file",
      [["empty.pdf", new Uint8Array(0)]],
      422,
      "empty_file",
      /^File 1 \(“empty\.pdf”\) is empty\. Nothing was uploaded\.$/,
    ],
    ["no files", [], 422, "no_files", /Choose at least one document/],
    [
      "96 files",
      Array.from({ length: 96 }, (_, i) => [`${i}.txt`, sampleText(`note ${i}`)]),
      413,
      "too_many_files",
      /has 96 documents; the limit is 95/,
    ],
  ] as [string, [string, Uint8Array][], number, string, RegExp][])(
    "refuses %s with %i and the error shape, creating nothing",
    async (_name, files, status, code, message) => {
      const tenant = uniqueTenantSlug("api-refused");
      const response = await post(form(tenant, files));
      expect(response.status).toBe(status);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe(code);
      expect(body.error.message).toMatch(message);
      await nothingCreated(tenant);
    },
  );

  it("refuses a missing tenant with 422 and the field's issue", async () => {
    const response = await post(form(null, [["a.txt", sampleText()]]));
    expect(response.status).toBe(422);
    const body = (await response.json()) as { error: { code: string; issues: { message: string }[] } };
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.issues[0]!.message).toMatch(/tenant/);
  });

  it("refuses a body that is not multipart (415) and one announced larger than the batch limit (413) before reading it", async () => {
    const json = await post(JSON.stringify({ tenant: "x" }), { "content-type": "application/json" });
    expect(json.status).toBe(415);
    expect(((await json.json()) as { error: { code: string } }).error.code).toBe("unsupported_media_type");
    const huge = await post("x", {
      "content-type": "multipart/form-data; boundary=x",
      "content-length": String(200 * 1024 * 1024),
    });
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { code: string } }).error.code).toBe("batch_too_large");
  });
});
