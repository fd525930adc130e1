/**
 * Malformed uploads, each with the answer the product must give. Every refused case must leave no
 * row behind; the accepted ones are files that look odd but are valid (line endings, a BOM,
 * spreadsheet formulas in text cells).
 */
import { E2E_ENV } from "./env";
import { transactionsCsv } from "./csv";

export const MAX_BYTES = Number(E2E_ENV.BOUNDED_UPLOAD_MAX_BYTES);
export const MAX_ROWS = Number(E2E_ENV.BOUNDED_UPLOAD_MAX_ROWS);

export const HEADER = "date,amount,currency,counterparty,description";
const ROW = "2026-01-05,-12.50,EUR,REWE Markt,Groceries";
/** The file limit as the messages write it, for a pattern: "4\\.0 MB". */
const LIMIT = `${(MAX_BYTES / 1024 / 1024).toFixed(1)} MB`.replace(".", "\\.");
/** Rows long enough that a file over the byte limit stays under the row limit. */
const LONG_ROW = `${ROW} ${"x".repeat(Math.ceil((2 * MAX_BYTES) / MAX_ROWS))}`;

/** How the bytes reach the server. */
export type Transport =
  /** multipart/form-data, field `file` */
  | "multipart"
  /** a text/csv body with ?tenant= (Content-Length set) */
  | "raw"
  /** a text/csv body sent chunked, without Content-Length */
  | "chunked"
  /** multipart/form-data sent chunked, without Content-Length */
  | "chunked-multipart";

export interface RefusedUpload {
  name: string;
  transport: Transport;
  body: () => Buffer;
  status: 413 | 415 | 422;
  code: string;
  message: RegExp;
}

/** Deterministic "random" bytes (a xorshift PRNG), so a failure can be replayed. */
export function noise(size: number, seed = 0x2545f491): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

const csv = (...lines: string[]) => Buffer.from(`${lines.join("\n")}\n`);
const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52]),
  noise(512, 7),
]);
// A real ZIP's local file header: "PK\x03\x04", version, flags, then a stored entry.
const ZIP = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0, 0, 0]), noise(256, 11)]);
const utf16 = (bom: boolean, endian: "le" | "be") => {
  const le = Buffer.from(`${HEADER}\n${ROW}\n`, "utf16le");
  const bytes = endian === "le" ? le : Buffer.from(le).swap16();
  const mark = endian === "le" ? [0xff, 0xfe] : [0xfe, 0xff];
  return bom ? Buffer.concat([Buffer.from(mark), bytes]) : bytes;
};

/** At least 30 files that must be refused whole, with the status, code and message each gets. */
export const REFUSED_UPLOADS: RefusedUpload[] = [
  {
    name: "PNG image bytes",
    transport: "multipart",
    body: () => PNG,
    status: 415,
    code: "not_text",
    message: /binary data|not a CSV/,
  },
  {
    name: "random bytes",
    transport: "multipart",
    body: () => noise(4096),
    status: 415,
    code: "not_text",
    message: /binary data/,
  },
  {
    name: "a ZIP archive",
    transport: "multipart",
    body: () => ZIP,
    status: 415,
    code: "not_text",
    message: /ZIP archive, not a CSV file/,
  },
  {
    name: "a PDF",
    transport: "raw",
    body: () => Buffer.from("%PDF-1.7\n1 0 obj\n<<>>\nendobj\n"),
    status: 415,
    code: "not_text",
    message: /PDF, not a CSV file/,
  },
  {
    name: "an old Excel .xls",
    transport: "multipart",
    body: () => Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), noise(64)]),
    status: 415,
    code: "not_text",
    message: /old Excel/,
  },
  {
    name: "UTF-16 LE with BOM",
    transport: "multipart",
    body: () => utf16(true, "le"),
    status: 415,
    code: "not_text",
    message: /UTF-16/,
  },
  {
    name: "UTF-16 BE with BOM",
    transport: "multipart",
    body: () => utf16(true, "be"),
    status: 415,
    code: "not_text",
    message: /UTF-16/,
  },
  {
    name: "UTF-16 LE without BOM",
    transport: "raw",
    body: () => utf16(false, "le"),
    status: 415,
    code: "not_text",
    message: /UTF-16|binary data/,
  },
  {
    name: "Latin-1 text",
    transport: "multipart",
    body: () => Buffer.from(`${HEADER}\n2026-01-05,-1.00,EUR,M\xfcller,B\n`, "latin1"),
    status: 415,
    code: "not_utf8",
    message: /not valid UTF-8/,
  },
  {
    name: "a NUL byte in the first line",
    transport: "multipart",
    body: () => csv(`date\0,amount,currency,counterparty,description`, ROW),
    status: 415,
    code: "not_text",
    message: /binary data/,
  },
  {
    name: "a NUL byte deep in the file (past the first 8 KB)",
    transport: "multipart",
    body: () => csv(HEADER, ...Array.from({ length: 400 }, () => ROW), "2026-01-06,-1.00,EUR,Evil\0Corp,nul"),
    status: 415,
    code: "not_text",
    message: /NUL|binary/,
  },
  {
    name: "an unbalanced quote",
    transport: "multipart",
    body: () => csv(HEADER, '2026-01-05,-1.00,EUR,"REWE Markt,open', ROW),
    status: 422,
    code: "malformed_csv",
    message: /not well-formed CSV/,
  },
  {
    name: "a quote inside an unquoted field",
    transport: "raw",
    body: () => csv(HEADER, '2026-01-05,-1.00,EUR,REWE "Markt",x'),
    status: 422,
    code: "malformed_csv",
    message: /not well-formed CSV near line 2/,
  },
  {
    name: "text after a closing quote",
    transport: "multipart",
    body: () => csv(HEADER, '2026-01-05,-1.00,EUR,"REWE" Markt,x'),
    status: 422,
    code: "malformed_csv",
    message: /not well-formed CSV/,
  },
  // A form upload is cut off at the file limit plus room for the form around it.
  {
    name: "one 10 MB line",
    transport: "multipart",
    body: () => Buffer.from(`${HEADER}\n2026-01-05,-1.00,EUR,A,${"x".repeat(10 * 1024 * 1024)}\n`),
    status: 413,
    code: "file_too_large",
    message: /^The upload is over \d+\.\d MB; the limit is \d+\.\d MB/,
  },
  {
    name: "one 10 MB line as a text/csv body",
    transport: "raw",
    body: () => Buffer.from(`${HEADER}\n2026-01-05,-1.00,EUR,A,${"x".repeat(10 * 1024 * 1024)}\n`),
    status: 413,
    code: "file_too_large",
    message: new RegExp(`the limit is ${LIMIT}`),
  },
  {
    name: "one byte over the limit",
    transport: "raw",
    body: () => Buffer.from(`${HEADER}\n2026-01-05,-1.00,EUR,A,`.padEnd(MAX_BYTES + 1, "x")),
    status: 413,
    code: "file_too_large",
    message: new RegExp(`the limit is ${LIMIT}`),
  },
  {
    name: "one byte over the limit, as a form upload",
    transport: "multipart",
    body: () => Buffer.from(`${HEADER}\n2026-01-05,-1.00,EUR,A,`.padEnd(MAX_BYTES + 1, "x")),
    status: 413,
    code: "file_too_large",
    message: new RegExp(`the limit is ${LIMIT}`),
  },
  // "over": refused while counting the bytes as they arrive, not after buffering the whole body.
  {
    name: "twice the limit, chunked without Content-Length",
    transport: "chunked",
    body: () => csv(HEADER, ...Array.from({ length: MAX_ROWS / 2 }, () => LONG_ROW)),
    status: 413,
    code: "file_too_large",
    message: new RegExp(`^The file is over ${LIMIT}; the limit is ${LIMIT}`),
  },
  {
    name: "twice the limit, chunked form upload without Content-Length",
    transport: "chunked-multipart",
    body: () => csv(HEADER, ...Array.from({ length: MAX_ROWS / 2 }, () => LONG_ROW)),
    status: 413,
    code: "file_too_large",
    message: /^The upload is over \d+\.\d MB; the limit is \d+\.\d MB/,
  },
  {
    name: "an empty file",
    transport: "multipart",
    body: () => Buffer.alloc(0),
    status: 422,
    code: "empty_file",
    message: /The file is empty/,
  },
  {
    name: "only blank lines",
    transport: "raw",
    body: () => Buffer.from("\r\n\n  \n"),
    status: 422,
    code: "empty_file",
    message: /The file is empty/,
  },
  {
    name: "a header and no rows",
    transport: "multipart",
    body: () => csv(HEADER),
    status: 422,
    code: "no_rows",
    message: /header but no transactions/,
  },
  {
    name: "a header and only empty rows",
    transport: "multipart",
    body: () => csv(HEADER, ",,,,", "", ",,,,"),
    status: 422,
    code: "no_rows",
    message: /header but no transactions/,
  },
  {
    name: "one row over the row limit",
    transport: "multipart",
    body: () => Buffer.from(transactionsCsv(MAX_ROWS + 1).csv),
    status: 413,
    code: "too_many_rows",
    message: new RegExp(
      `${(MAX_ROWS + 1).toLocaleString("en-US")} rows; the limit is ${MAX_ROWS.toLocaleString("en-US")}`,
    ),
  },
  {
    name: "tab-separated",
    transport: "multipart",
    body: () => csv(HEADER.replaceAll(",", "\t"), ROW.replaceAll(",", "\t")),
    status: 422,
    code: "wrong_delimiter",
    message: /separated by tabs/,
  },
  {
    name: "pipe-separated",
    transport: "raw",
    body: () => csv(HEADER.replaceAll(",", "|"), ROW.replaceAll(",", "|")),
    status: 422,
    code: "wrong_delimiter",
    message: /separated by '\|'/,
  },
  {
    name: "a duplicated header column",
    transport: "multipart",
    body: () => csv(`${HEADER},Amount`, `${ROW},1.00`),
    status: 422,
    code: "duplicate_columns",
    message: /“amount” appears more than once/,
  },
  {
    name: "a missing required column",
    transport: "multipart",
    body: () => csv("date,amount,counterparty,description", "2026-01-05,-1.00,REWE,x"),
    status: 422,
    code: "missing_columns",
    message: /Missing required column: currency/,
  },
  {
    name: "no header (data on the first line)",
    transport: "raw",
    body: () => csv(ROW, ROW),
    status: 422,
    code: "missing_columns",
    message: /Missing required columns: date, amount, currency, counterparty, description/,
  },
  {
    name: "a huge number of columns",
    transport: "multipart",
    body: () =>
      csv(`${HEADER},${Array.from({ length: 20_000 }, (_, i) => `c${i}`).join(",")}`, `${ROW}${",".repeat(20_000)}`),
    status: 422,
    code: "too_many_columns",
    message: /20,005 columns; the limit is/,
  },
  {
    name: "a 100 KB field",
    transport: "multipart",
    body: () => csv(HEADER, `2026-01-05,-1.00,EUR,A,${"y".repeat(100 * 1024)}`),
    status: 422,
    code: "malformed_csv",
    message: /not well-formed CSV near line 2/,
  },
];

/** Files that look odd but are valid and must be accepted (201). */
export const ACCEPTED_UPLOADS: { name: string; body: () => Buffer; rows: number }[] = [
  { name: "CRLF line endings", body: () => Buffer.from(`${HEADER}\r\n${ROW}\r\n${ROW}\r\n`), rows: 2 },
  { name: "CRLF and LF mixed", body: () => Buffer.from(`${HEADER}\r\n${ROW}\n${ROW}\r\n${ROW}`), rows: 3 },
  {
    name: "a UTF-8 BOM, semicolons, quoted CRLF inside a field",
    body: () =>
      Buffer.from(
        `\ufeffdate;amount;currency;counterparty;description\r\n2026-01-05;-1.234,56;EUR;"Müller; Sohn";"two\r\nlines"\r\n`,
      ),
    rows: 1,
  },
];

/** Spreadsheet formulas, in the cells where they make a row valid and where they make it fail. */
export const FORMULAS = ['=HYPERLINK("http://x","click")', "+cmd|' /C calc'!A0", "-1+1", "@SUM(A1)"] as const;

/** A valid import whose text cells are formulas, and rows that fail because a formula sits in `amount`. */
export function formulaCsv(): { csv: Buffer; failingRows: { row: number; shown: string }[] } {
  const q = (s: string) => `"${s.replaceAll('"', '""')}"`;
  const lines = [HEADER];
  for (const f of FORMULAS) lines.push(`2026-01-05,-3.00,EUR,${q(f)},${q(f)}`);
  const failingRows = FORMULAS.map((f, i) => {
    lines.push(`2026-01-06,${q(f)},EUR,Formula Amount,x`);
    // The reason quotes the first 20 characters of the amount.
    return { row: FORMULAS.length + i + 2, shown: f.slice(0, 20) };
  });
  return { csv: Buffer.from(`${lines.join("\n")}\n`), failingRows };
}

export interface RefusedBatch {
  name: string;
  files: { name: string; mimeType: string; buffer: Buffer }[] | "text-field" | "none";
  status: 413 | 415 | 422;
  code: string;
  message: RegExp;
}

const txt = (name: string, text = "An invoice.\n") => ({ name, mimeType: "text/plain", buffer: Buffer.from(text) });

/** Document batches that must be refused whole, naming the file. */
export const REFUSED_BATCHES: RefusedBatch[] = [
  {
    name: "a ZIP archive",
    files: [{ name: "scans.zip", mimeType: "application/zip", buffer: ZIP }],
    status: 415,
    code: "unsupported_type",
    message: /File 1 \(“scans\.zip”\) is a Word or Excel document or a ZIP archive/,
  },
  {
    name: "random bytes",
    files: [{ name: "blob.bin", mimeType: "application/octet-stream", buffer: noise(2048) }],
    status: 415,
    code: "unsupported_type",
    message: /File 1 \(“blob\.bin”\) is not a supported document type/,
  },
  {
    name: "UTF-16 text",
    files: [{ name: "note.txt", mimeType: "text/plain", buffer: utf16(true, "le") }],
    status: 415,
    code: "unsupported_type",
    message: /UTF-16 text/,
  },
  {
    name: "an empty file after a good one",
    files: [txt("good.txt"), txt("empty.txt", "")],
    status: 422,
    code: "empty_file",
    message: /File 2 \(“empty\.txt”\) is empty\. Nothing was uploaded/,
  },
  {
    name: "a PNG named .pdf next to a GIF",
    files: [
      { name: "scan.pdf", mimeType: "application/pdf", buffer: PNG },
      { name: "cat.gif", mimeType: "image/gif", buffer: Buffer.from("GIF89a\x01\x00") },
    ],
    status: 415,
    code: "unsupported_type",
    message: /File 2 \(“cat\.gif”\) is a GIF image/,
  },
  {
    name: "text with NUL bytes",
    files: [txt("nul.txt", "An\0invoice")],
    status: 415,
    code: "unsupported_type",
    message: /File 1 \(“nul\.txt”\)/,
  },
  {
    name: "96 documents",
    files: Array.from({ length: 96 }, (_, i) => txt(`d${i}.txt`)),
    status: 413,
    code: "too_many_files",
    message: /96 documents; the limit is 95/,
  },
  { name: "no files", files: "none", status: 422, code: "no_files", message: /Choose at least one document/ },
  {
    name: "files sent as text fields",
    files: "text-field",
    status: 422,
    code: "files_not_files",
    message: /must carry files, not text/,
  },
];

/**
 * Addresses that do not decode to text — a NUL byte or a broken %-escape in the path or the query
 * string — on pages and API routes: each a 400 with `malformed_input`, never a 500.
 */
export const MALFORMED_URLS: string[] = [
  "/api/jobs?q=%00",
  "/api/jobs/%E0%A4%A",
  "/api/jobs?q=%",
  "/api/progress/abc%00def",
  "/api/imports?tenant=%zz",
  "/jobs?q=%",
  "/jobs?q=%00",
  "/jobs/%E0%A4%A",
  "/progress/%C0",
  "/login?next=%",
];

/** JSON bodies with a NUL byte in a field that would be stored: 400 `nul_byte`. */
export const NUL_JSON_BODIES: { path: string; body: string }[] = [
  { path: "/api/syncs", body: '{ "tenant": "acme\\u0000", "family": "statistics" }' },
  { path: "/api/jobs/retry", body: '{ "filter": { "tenant": "a\\u0000b" } }' },
];
