import { describe, expect, it } from "vitest";
import { formatBytes } from "@/lib/units";
import {
  MAX_COLUMNS,
  inspectUpload,
  normalizeLineEndings,
  type UploadInspection,
  type UploadLimits,
} from "./inspect-upload";

const LIMITS: UploadLimits = { maxBytes: 1024 * 1024, maxRows: 100 };
const HEADER = "date,amount,currency,counterparty,description";

const utf8 = (text: string) => new TextEncoder().encode(text);
const bytes = (...values: number[]) => Uint8Array.from(values);

function rejected(result: UploadInspection) {
  if (result.ok) throw new Error(`expected a rejection, got ${JSON.stringify(result)}`);
  return result;
}

function accepted(result: UploadInspection) {
  if (!result.ok) throw new Error(`expected acceptance, got ${result.code}: ${result.message}`);
  return result;
}

describe("inspectUpload: size", () => {
  it("refuses a file over the byte limit with 413 and says both sizes", () => {
    const result = rejected(inspectUpload(new Uint8Array(2049).fill(0x61), { maxBytes: 2048, maxRows: 10 }));
    expect(result).toMatchObject({ status: 413, code: "file_too_large" });
    expect(result.message).toBe("The file is 2.0 KB; the limit is 2.0 KB. Split it into smaller files.");
  });

  it("checks the size before reading anything, so a huge binary is a 413, not a 415", () => {
    const pdf = new Uint8Array(4096).fill(0);
    pdf.set([0x25, 0x50, 0x44, 0x46]);
    expect(rejected(inspectUpload(pdf, { maxBytes: 1024, maxRows: 10 })).status).toBe(413);
  });

  it("accepts a file of exactly the byte limit", () => {
    const file = utf8(`${HEADER}\n2026-01-01,1.00,EUR,Rewe,\n`);
    expect(inspectUpload(file, { maxBytes: file.byteLength, maxRows: 10 }).ok).toBe(true);
  });

  it("formats sizes the way a person reads them", () => {
    expect(formatBytes(512)).toBe("512 bytes");
    expect(formatBytes(1536)).toBe("1.5 KB");
    expect(formatBytes(10 * 1024 * 1024)).toBe("10.0 MB");
  });
});

describe("inspectUpload: not CSV text (415)", () => {
  it("refuses UTF-16 little-endian text and says to save as CSV UTF-8", () => {
    const le = bytes(0xff, 0xfe, ...[...HEADER].flatMap((c) => [c.charCodeAt(0), 0]));
    const result = rejected(inspectUpload(le, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toContain("UTF-16");
    expect(result.message).toContain("CSV UTF-8");
  });

  it("refuses UTF-16 big-endian text", () => {
    const be = bytes(0xfe, 0xff, ...[...HEADER].flatMap((c) => [0, c.charCodeAt(0)]));
    expect(rejected(inspectUpload(be, LIMITS))).toMatchObject({ status: 415, code: "not_text" });
  });

  it("refuses an Excel workbook (.xlsx, a ZIP archive)", () => {
    const xlsx = bytes(0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x06, 0x00, 0x08, 0x00);
    const result = rejected(inspectUpload(xlsx, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toContain("Excel");
  });

  it("refuses an old Excel (.xls) file", () => {
    const xls = bytes(0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1);
    const result = rejected(inspectUpload(xls, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toContain(".xls");
  });

  it("refuses a PDF", () => {
    const pdf = utf8("%PDF-1.7\n%âãÏÓ\n1 0 obj\n");
    const result = rejected(inspectUpload(pdf, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toContain("PDF");
  });

  it("refuses binary data (NUL bytes) even behind a plausible header", () => {
    const binary = new Uint8Array([...utf8(`${HEADER}\n`), 0x00, 0x01, 0x02, 0x00]);
    const result = rejected(inspectUpload(binary, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toContain("binary");
  });

  it("refuses text that is not valid UTF-8 (a Latin-1 export) instead of importing mangled names", () => {
    // "Café" in Latin-1: é is the single byte 0xE9, invalid in UTF-8.
    const latin1 = new Uint8Array([...utf8(`${HEADER}\n2026-01-01,1.00,EUR,Caf`), 0xe9, ...utf8(",\n")]);
    const result = rejected(inspectUpload(latin1, LIMITS));
    expect(result).toMatchObject({ status: 415, code: "not_utf8" });
    expect(result.message).toContain("CSV UTF-8");
  });
});

describe("inspectUpload: unusable content (422)", () => {
  it("refuses a zero-byte file as empty", () => {
    expect(rejected(inspectUpload(new Uint8Array(0), LIMITS))).toEqual({
      ok: false,
      status: 422,
      code: "empty_file",
      message: "The file is empty.",
    });
  });

  it("refuses a file of only whitespace or only a byte-order mark as empty", () => {
    expect(rejected(inspectUpload(utf8(" \r\n\n\t"), LIMITS)).code).toBe("empty_file");
    expect(rejected(inspectUpload(bytes(0xef, 0xbb, 0xbf), LIMITS)).code).toBe("empty_file");
  });

  it("refuses a header without any transaction", () => {
    const result = rejected(inspectUpload(utf8(`${HEADER}\n`), LIMITS));
    expect(result).toMatchObject({ status: 422, code: "no_rows" });
    expect(result.message).toBe("The file has a header but no transactions.");
  });

  it("counts blank lines after the header as no rows", () => {
    expect(rejected(inspectUpload(utf8(`${HEADER}\n\n\n`), LIMITS)).code).toBe("no_rows");
    expect(rejected(inspectUpload(utf8(`${HEADER}\r\n\r\n\r\n`), LIMITS)).code).toBe("no_rows");
  });

  it("refuses a header missing required columns and names the missing ones and what it found", () => {
    const result = rejected(inspectUpload(utf8("date,amount,payee\n2026-01-01,1.00,Rewe\n"), LIMITS));
    expect(result).toMatchObject({ status: 422, code: "missing_columns" });
    expect(result.message).toBe(
      "Missing required columns: currency, counterparty, description. The first line must name the columns date, amount, currency, counterparty, description (found: date, amount, payee).",
    );
  });

  it("uses the singular when exactly one column is missing", () => {
    const result = rejected(
      inspectUpload(utf8("date;amount;currency;counterparty\n2026-01-01;1,00;EUR;Rewe\n"), LIMITS),
    );
    expect(result.code).toBe("missing_columns");
    expect(result.message).toMatch(/^Missing required column: description\./);
  });

  it("refuses a file whose first line is data, not a header", () => {
    const result = rejected(inspectUpload(utf8("2026-01-01,1.00,EUR,Rewe,Groceries\n"), LIMITS));
    expect(result).toMatchObject({ status: 422, code: "missing_columns" });
  });

  it("refuses a header that names a column twice", () => {
    const result = rejected(inspectUpload(utf8(`${HEADER},Amount\n2026-01-01,1.00,EUR,Rewe,x,2.00\n`), LIMITS));
    expect(result).toMatchObject({ status: 422, code: "duplicate_columns" });
    expect(result.message).toBe("The column “amount” appears more than once in the header.");
  });

  it("refuses tab-separated columns and says which delimiters work", () => {
    const tsv = utf8("date\tamount\tcurrency\tcounterparty\tdescription\n2026-01-01\t1.00\tEUR\tRewe\tx\n");
    const result = rejected(inspectUpload(tsv, LIMITS));
    expect(result).toMatchObject({ status: 422, code: "wrong_delimiter" });
    expect(result.message).toBe("The columns are separated by tabs. Use a comma (,) or a semicolon (;).");
  });

  it("refuses pipe-separated columns", () => {
    const psv = utf8("date|amount|currency|counterparty|description\n2026-01-01|1.00|EUR|Rewe|x\n");
    const result = rejected(inspectUpload(psv, LIMITS));
    expect(result).toMatchObject({ status: 422, code: "wrong_delimiter" });
    expect(result.message).toContain("'|'");
  });

  it("refuses an unbalanced quote as malformed CSV and says near which line", () => {
    const file = utf8(
      `${HEADER}\n2026-01-01,1.00,EUR,Rewe,ok\n2026-01-02,2.00,EUR,"Aldi,unclosed\n2026-01-03,3.00,EUR,Lidl,ok\n`,
    );
    const result = rejected(inspectUpload(file, LIMITS));
    expect(result).toMatchObject({ status: 422, code: "malformed_csv" });
    expect(result.message).toMatch(/^The file is not well-formed CSV/);
    expect(result.message).toMatch(/near line \d+/);
  });

  it("refuses a stray quote inside an unquoted field as malformed CSV", () => {
    const file = utf8(`${HEADER}\n2026-01-01,1.00,EUR,Rewe "Markt",x\n`);
    expect(rejected(inspectUpload(file, LIMITS))).toMatchObject({ status: 422, code: "malformed_csv" });
  });
});

describe("inspectUpload: row limit", () => {
  const file = (rows: number) => utf8(`${HEADER}\n${"2026-01-01,1.00,EUR,Rewe,x\n".repeat(rows)}`);

  it("refuses more rows than the limit with 413 and says both counts", () => {
    const result = rejected(inspectUpload(file(1_001), { maxBytes: LIMITS.maxBytes, maxRows: 1_000 }));
    expect(result).toMatchObject({ status: 413, code: "too_many_rows" });
    expect(result.message).toBe("The file has 1,001 rows; the limit is 1,000. Split it into smaller files.");
  });

  it("accepts exactly the row limit", () => {
    expect(accepted(inspectUpload(file(1_000), { maxBytes: LIMITS.maxBytes, maxRows: 1_000 })).rows).toBe(1_000);
  });
});

describe("inspectUpload: what a bank export may look like and still be accepted", () => {
  it("accepts a plain comma-separated file and counts its data rows", () => {
    const result = accepted(
      inspectUpload(utf8(`${HEADER}\n2026-01-01,-1.00,EUR,Rewe,x\n2026-01-02,2.00,EUR,Aldi,y\n`), LIMITS),
    );
    expect(result).toEqual({
      ok: true,
      delimiter: ",",
      rows: 2,
      columns: ["date", "amount", "currency", "counterparty", "description"],
    });
  });

  it("accepts UTF-8 with a byte-order mark (Excel's “CSV UTF-8”) without the mark leaking into the first column", () => {
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(`${HEADER}\n2026-01-01,1.00,EUR,Café Müller,x\n`)]);
    const result = accepted(inspectUpload(withBom, LIMITS));
    expect(result.columns[0]).toBe("date");
    expect(result.rows).toBe(1);
  });

  it("accepts semicolons (European exports, decimal commas)", () => {
    const result = accepted(
      inspectUpload(
        utf8("date;amount;currency;counterparty;description\n2026-01-01;-1.234,56;EUR;Rewe;Einkauf, groß\n"),
        LIMITS,
      ),
    );
    expect(result.delimiter).toBe(";");
    expect(result.rows).toBe(1);
  });

  it("accepts the columns in any order and in any case, with spaces around the names", () => {
    const result = accepted(
      inspectUpload(utf8(" Counterparty , DESCRIPTION,Amount,Currency, Date\nRewe,x,1.00,EUR,2026-01-01\n"), LIMITS),
    );
    expect(result.columns).toEqual(["counterparty", "description", "amount", "currency", "date"]);
  });

  it("accepts extra columns beside the required ones", () => {
    const result = accepted(
      inspectUpload(utf8(`booking id,${HEADER},balance\n42,2026-01-01,1.00,EUR,Rewe,x,100.00\n`), LIMITS),
    );
    expect(result.columns).toEqual([
      "booking id",
      "date",
      "amount",
      "currency",
      "counterparty",
      "description",
      "balance",
    ]);
    expect(result.rows).toBe(1);
  });

  it("accepts Windows line endings (CRLF) and does not count the last line break as a row", () => {
    const result = accepted(
      inspectUpload(utf8(`${HEADER}\r\n2026-01-01,1.00,EUR,Rewe,x\r\n2026-01-02,2.00,EUR,Aldi,y\r\n`), LIMITS),
    );
    expect(result.rows).toBe(2);
    expect(result.columns.at(-1)).toBe("description");
  });

  it("accepts quoted fields holding the delimiter, quotes and line breaks", () => {
    const file = utf8(`${HEADER}\n2026-01-01,"1,00",EUR,"Rewe, Markt ""Mitte""","two\nlines"\n`);
    expect(accepted(inspectUpload(file, LIMITS)).rows).toBe(1);
  });

  it("does not reject rows with a wrong field count here: they become row failures in the import", () => {
    const file = utf8(`${HEADER}\n2026-01-01,1.00,EUR,Rewe\n2026-01-02,2.00,EUR,Aldi,x,extra\n`);
    expect(accepted(inspectUpload(file, LIMITS)).rows).toBe(2);
  });

  it("does not count blank lines between transactions as rows", () => {
    expect(
      accepted(inspectUpload(utf8(`${HEADER}\n2026-01-01,1.00,EUR,Rewe,x\n\n2026-01-02,2.00,EUR,Aldi,y\n`), LIMITS))
        .rows,
    ).toBe(2);
  });

  it("accepts a last line without a line break", () => {
    expect(accepted(inspectUpload(utf8(`${HEADER}\n2026-01-01,1.00,EUR,Rewe,x`), LIMITS)).rows).toBe(1);
  });
});

describe("inspectUpload: what the first bytes do not show", () => {
  it("refuses a NUL byte anywhere in the file, not only in the first 8 KB, and says on which line", () => {
    const rows = Array.from({ length: 400 }, () => "2026-01-01,1.00,EUR,Rewe,x").join("\n");
    const result = rejected(
      inspectUpload(utf8(`${HEADER}\n${rows}\n2026-01-02,1.00,EUR,Evil\u0000Corp,x\n`), {
        maxBytes: LIMITS.maxBytes,
        maxRows: 1000,
      }),
    );
    expect(result).toMatchObject({ status: 415, code: "not_text" });
    expect(result.message).toBe(
      "The file contains a NUL byte (binary data) on line 402, so it is not a CSV text file.",
    );
  });

  it("refuses a header with more columns than the limit, and accepts exactly the limit", () => {
    const extra = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`).join(",");
    const over = rejected(
      inspectUpload(utf8(`${HEADER},${extra(MAX_COLUMNS - 4)}\n2026-01-01,1.00,EUR,Rewe,x\n`), LIMITS),
    );
    expect(over).toMatchObject({ status: 422, code: "too_many_columns" });
    expect(over.message).toMatch(/^The header has 1,001 columns; the limit is 1,000\./);
    expect(
      accepted(inspectUpload(utf8(`${HEADER},${extra(MAX_COLUMNS - 5)}\n2026-01-01,1.00,EUR,Rewe,x\n`), LIMITS))
        .columns,
    ).toHaveLength(MAX_COLUMNS);
  });
});

describe("normalizeLineEndings", () => {
  const text = (b: Uint8Array) => new TextDecoder().decode(b);

  it("turns every CRLF into LF, so a file mixing CRLF and LF keeps its rows apart", () => {
    const mixed = utf8(
      `${HEADER}\r\n2026-01-01,1.00,EUR,Rewe,x\n2026-01-02,2.00,EUR,Aldi,y\r\n2026-01-03,3.00,EUR,Lidl,z`,
    );
    expect(text(normalizeLineEndings(mixed))).toBe(
      `${HEADER}\n2026-01-01,1.00,EUR,Rewe,x\n2026-01-02,2.00,EUR,Aldi,y\n2026-01-03,3.00,EUR,Lidl,z`,
    );
    expect(accepted(inspectUpload(normalizeLineEndings(mixed), LIMITS)).rows).toBe(3);
  });

  it("leaves a file without CRLF as it is (the same bytes) and keeps a lone CR", () => {
    const lf = utf8(`${HEADER}\n2026-01-01,1.00,EUR,Re\rwe,x\n`);
    expect(normalizeLineEndings(lf)).toBe(lf);
    expect(text(normalizeLineEndings(utf8("a\r\r\nb\r")))).toBe("a\r\nb\r");
  });
});
