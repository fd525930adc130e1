import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { closeRedis } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { uploadRows } from "./csv-rows";
import { storedUpload } from "./stored-upload";

const tenant = uniqueTenantSlug("stored-upload");

afterAll(async () => {
  await deleteTenant(tenant);
  await closeRedis();
  await closeDb();
});

/** A job with `content` stored as its upload. */
async function withUpload(content: Buffer): Promise<string> {
  const { id } = await makeJob(tenant, { total: 1, softMs: 60_000, hardMs: 90_000 });
  await db().upload.create({
    data: { jobId: id, filename: "f.csv", delimiter: ";", sizeBytes: content.length, content: new Uint8Array(content) },
  });
  return id;
}

describe("a stored upload, read a slice at a time", () => {
  it("hands out the file in slices of at most 256 kB, in order, byte for byte, and its rows read as from one piece", async () => {
    // 40,000 rows, about 2.3 MB, with multi-byte characters that fall across the slices' edges.
    const lines = Array.from(
      { length: 40_000 },
      (_, i) => `2026-01-01;-${i + 1},50;EUR;Müller — Grünstraße ${i} €;row ${i}`,
    );
    const content = Buffer.from(`date;amount;currency;counterparty;description\n${lines.join("\n")}\n`);
    const id = await withUpload(content);

    const upload = await storedUpload(id);
    expect(upload?.delimiter).toBe(";");
    const pieces: Uint8Array[] = [];
    for await (const piece of upload!.bytes()) pieces.push(piece);
    expect(pieces.length).toBeGreaterThan(1);
    expect(Math.max(...pieces.map((p) => p.byteLength))).toBeLessThanOrEqual(256 * 1024);
    expect(Buffer.concat(pieces).equals(content)).toBe(true);

    let count = 0;
    for await (const { row, record } of uploadRows(upload!)) {
      expect(record[3]).toBe(`Müller — Grünstraße ${count} €`);
      expect(row).toBe(count + 2);
      count += 1;
    }
    expect(count).toBe(40_000);
  });

  it("answers null for a job with no stored file", async () => {
    const { id } = await makeJob(tenant, { total: 1, softMs: 60_000, hardMs: 90_000 });
    expect(await storedUpload(id)).toBeNull();
  });
});
