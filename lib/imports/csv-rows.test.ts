import { describe, expect, it } from "vitest";
import { uploadRecords, uploadRows } from "./csv-rows";
import type { StoredUpload } from "./stored-upload";

const header = "date,amount,currency,counterparty,description\n";
const fileOf = (rows: string[]): StoredUpload => ({
  delimiter: ",",
  bytes: () => [Buffer.from(header + rows.join("\n"))],
});

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe("reading an upload's rows", () => {
  it("parses ahead only as far as the reader has come, however long the file: its rows are not all held at once", async () => {
    const rows = Array.from({ length: 100_000 }, (_, i) => `2026-01-01,${i + 1}.00,EUR,Stadtwerke Nord,row ${i}`);
    const records = uploadRecords(fileOf(rows)) as AsyncIterable<string[]> & { info: { records: number } };
    const it = records[Symbol.asyncIterator]();
    await it.next();
    await it.next();
    // The parser's own count of the records it has made so far: a buffer's worth, not the file.
    expect(records.info.records).toBeGreaterThanOrEqual(2);
    expect(records.info.records).toBeLessThan(2_000);
    await it.return?.();
  });

  it("reads multi-byte characters and quoted line breaks that fall across the parser's slices as one field", async () => {
    const rows = Array.from(
      { length: 3_000 },
      (_, i) => `2026-01-01,-${i + 1}.50,EUR,"Müller & Söhne — Grünstraße ${i} €",“Zahlung”\n2. Zeile ${i}`,
    ).map((r) => r.replace(/“Zahlung”\n2\. Zeile (\d+)/, '"“Zahlung”\n2. Zeile $1"'));
    const read = await all(uploadRows(fileOf(rows)));
    expect(read).toHaveLength(3_000);
    for (const [i, r] of read.entries()) {
      expect(r.row).toBe(i + 2);
      expect(r.record).toEqual([
        "2026-01-01",
        `-${i + 1}.50`,
        "EUR",
        `Müller & Söhne — Grünstraße ${i} €`,
        `“Zahlung”\n2. Zeile ${i}`,
      ]);
    }
  });
});
