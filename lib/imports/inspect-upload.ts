import { parse } from "csv-parse/sync";
import { formatBytes } from "@/lib/units";
import { formatCount } from "@/lib/format/number";

/** The columns a bank-transaction CSV must have (any order, case-insensitive, extra columns allowed). */
export const REQUIRED_COLUMNS = ["date", "amount", "currency", "counterparty", "description"] as const;

/**
 * The most columns a header may name. Bank exports have a few dozen; thousands of columns are a
 * broken or hostile file, and each would be carried through every row.
 */
export const MAX_COLUMNS = 1000;

export interface UploadLimits {
  maxBytes: number;
  maxRows: number;
}

export type Delimiter = "," | ";";

export type UploadInspection =
  | { ok: true; delimiter: Delimiter; rows: number; columns: string[] }
  | { ok: false; status: 413 | 415 | 422; code: UploadRejection; message: string };

export type UploadRejection =
  | "file_too_large"
  | "too_many_rows"
  | "not_text"
  | "not_utf8"
  | "empty_file"
  | "no_rows"
  | "missing_columns"
  | "duplicate_columns"
  | "too_many_columns"
  | "wrong_delimiter"
  | "malformed_csv";

/** A refused upload: the status, the code and the sentence for the person who uploaded it. */
type Refusal = Extract<UploadInspection, { ok: false }>;

/** What a check hands the next one, when the upload passes it. */
type Passed<T> = { ok: true } & T;

const reject = (status: 413 | 415 | 422, code: UploadRejection, message: string): Refusal => ({
  ok: false,
  status,
  code,
  message,
});

function sniffBinary(bytes: Uint8Array): string | null {
  const starts = (...sig: number[]) => sig.every((b, i) => bytes[i] === b);
  if (starts(0xff, 0xfe) || starts(0xfe, 0xff))
    return "The file is UTF-16 text. Save it as “CSV UTF-8” and upload it again.";
  if (starts(0x50, 0x4b, 0x03, 0x04))
    return "This looks like an Excel workbook or a ZIP archive, not a CSV file. Export the sheet as “CSV UTF-8”.";
  if (starts(0x25, 0x50, 0x44, 0x46))
    return "This is a PDF, not a CSV file. Export your transactions as CSV from your bank.";
  if (starts(0xd0, 0xcf, 0x11, 0xe0))
    return "This looks like an old Excel (.xls) file, not a CSV file. Export the sheet as “CSV UTF-8”.";
  if (bytes.subarray(0, 8192).includes(0)) return "The file contains binary data, so it is not a CSV text file.";
  return null;
}

/**
 * CRLF → LF. csv-parse takes the line ending of the first line for the whole file, so in a file
 * whose lines end in a mix of CRLF and LF (exports pasted together) rows would merge or keep a
 * stray CR. Applied before the checks and before the file is stored, so the inspection and the
 * import read the same rows, the ones a spreadsheet shows. Works on bytes: in UTF-8 a 0x0D byte is
 * always a CR.
 */
export function normalizeLineEndings(bytes: Uint8Array): Uint8Array {
  let crlf = 0;
  for (let i = 0; i + 1 < bytes.length; i++) if (bytes[i] === 0x0d && bytes[i + 1] === 0x0a) crlf++;
  if (crlf === 0) return bytes;
  const out = new Uint8Array(bytes.length - crlf);
  let o = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0d && bytes[i + 1] === 0x0a) continue;
    out[o++] = bytes[i]!;
  }
  return out;
}

/** Splits the header line with one delimiter and normalises the names. */
function headerColumns(headerLine: string, delimiter: string): string[] | null {
  try {
    const [row] = parse(headerLine, { delimiter, relax_quotes: true, trim: true }) as string[][];
    return (row ?? []).map((c) => c.toLowerCase());
  } catch {
    return null;
  }
}

/** The size limit and the empty file, read from the byte count alone. */
function checkSize(bytes: Uint8Array, limits: UploadLimits): Refusal | undefined {
  if (bytes.byteLength > limits.maxBytes) {
    return reject(
      413,
      "file_too_large",
      `The file is ${formatBytes(bytes.byteLength)}; the limit is ${formatBytes(limits.maxBytes)}. Split it into smaller files.`,
    );
  }
  if (bytes.byteLength === 0) return reject(422, "empty_file", "The file is empty.");
  return undefined;
}

/** A file that is not text at all (UTF-16, a workbook, a PDF, binary data), told by its first bytes. */
function checkBinary(bytes: Uint8Array): Refusal | undefined {
  const binary = sniffBinary(bytes);
  return binary ? reject(415, "not_text", binary) : undefined;
}

/** The bytes as UTF-8 text, refused when they are not UTF-8 or say nothing. */
function decodeText(bytes: Uint8Array): Refusal | Passed<{ text: string }> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return reject(415, "not_utf8", "The file is not valid UTF-8 text. Save it as “CSV UTF-8” and upload it again.");
  }
  if (text.trim() === "") return reject(422, "empty_file", "The file is empty.");
  return { ok: true, text };
}

/** A NUL byte anywhere in the text, named by its line. */
function checkNul(text: string): Refusal | undefined {
  // Binary sniffing reads only the start: a NUL further in is binary data too, and PostgreSQL
  // text cannot hold it, so the row would fail for a reason nobody could see in a spreadsheet.
  const nul = text.indexOf("\u0000");
  if (nul === -1) return undefined;
  const line = text.slice(0, nul).split("\n").length;
  return reject(
    415,
    "not_text",
    `The file contains a NUL byte (binary data) on line ${formatCount(line)}, so it is not a CSV text file.`,
  );
}

/** The delimiters a file may use, in the order they are tried. */
const DELIMITERS: Delimiter[] = [",", ";"];

/** Whether a header names every required column. */
const hasRequiredColumns = (cols: string[] | null): cols is string[] =>
  cols !== null && REQUIRED_COLUMNS.every((c) => cols.includes(c));

/** The header's delimiter and columns: the first delimiter that splits it into the required columns. */
function readHeader(text: string): Refusal | Passed<{ delimiter: Delimiter; columns: string[] }> {
  const headerLine = text.split(/\r?\n/, 1)[0]!;
  for (const delimiter of DELIMITERS) {
    const columns = headerColumns(headerLine, delimiter);
    if (hasRequiredColumns(columns)) return { ok: true, delimiter, columns };
  }
  return wrongDelimiter(headerLine) ?? missingColumns(headerLine);
}

/** A header with the required columns separated by tabs or '|', which the import does not read. */
function wrongDelimiter(headerLine: string): Refusal | undefined {
  for (const [other, label] of [
    ["\t", "tabs"],
    ["|", "'|'"],
  ] as const) {
    if (hasRequiredColumns(headerColumns(headerLine, other))) {
      return reject(
        422,
        "wrong_delimiter",
        `The columns are separated by ${label}. Use a comma (,) or a semicolon (;).`,
      );
    }
  }
  return undefined;
}

/** The required columns the header lacks, read with the delimiter that finds the most columns. */
function missingColumns(headerLine: string): Refusal {
  const best = DELIMITERS.map((d) => headerColumns(headerLine, d) ?? []).sort((a, b) => b.length - a.length)[0] ?? [];
  const missing = REQUIRED_COLUMNS.filter((c) => !best.includes(c));
  const found = best.filter((c) => c !== "").slice(0, 10);
  return reject(
    422,
    "missing_columns",
    `Missing required column${missing.length > 1 ? "s" : ""}: ${missing.join(", ")}. The first line must name the columns ${REQUIRED_COLUMNS.join(", ")}` +
      (found.length ? ` (found: ${found.join(", ")}).` : "."),
  );
}

/** Too many columns, or a column named twice. */
function checkColumns(columns: string[]): Refusal | undefined {
  if (columns.length > MAX_COLUMNS) {
    return reject(
      422,
      "too_many_columns",
      `The header has ${formatCount(columns.length)} columns; the limit is ${formatCount(MAX_COLUMNS)}. Keep the columns ${REQUIRED_COLUMNS.join(", ")} and remove the others.`,
    );
  }
  const duplicated = columns.filter((c, i) => c !== "" && columns.indexOf(c) !== i);
  if (duplicated.length)
    return reject(422, "duplicate_columns", `The column “${duplicated[0]}” appears more than once in the header.`);
  return undefined;
}

/** The rows after the header, parsed as the import parses them; refused when the CSV is not well-formed. */
function parseRows(text: string, delimiter: Delimiter): Refusal | Passed<{ rows: number }> {
  try {
    const records = parse(text, {
      bom: true,
      delimiter,
      from_line: 2,
      relax_column_count: true,
      skip_empty_lines: true,
      // Spreadsheets export empty trailing rows as ",,,,": they are not transactions.
      skip_records_with_empty_values: true,
      max_record_size: 64 * 1024,
    }) as string[][];
    return { ok: true, rows: records.length };
  } catch (err) {
    const line = (err as { lines?: number }).lines;
    const detail = err instanceof Error ? err.message.replace(/^Invalid Record Length: |^CSV_\w+: /, "") : "unreadable";
    return reject(
      422,
      "malformed_csv",
      `The file is not well-formed CSV${line ? ` near line ${line}` : ""}: ${detail}`,
    );
  }
}

/** No transactions, or more than the row limit. */
function checkRowCount(rows: number, limits: UploadLimits): Refusal | undefined {
  if (rows === 0) return reject(422, "no_rows", "The file has a header but no transactions.");
  if (rows > limits.maxRows) {
    return reject(
      413,
      "too_many_rows",
      `The file has ${formatCount(rows)} rows; the limit is ${formatCount(limits.maxRows)}. Split it into smaller files.`,
    );
  }
  return undefined;
}

/**
 * Everything checked before any row is created: size, encoding, delimiter, header, row count and
 * CSV well-formedness. Individual bad rows are not rejected here: they become item failures. The
 * checks run in order and the first refusal is the answer.
 */
export function inspectUpload(bytes: Uint8Array, limits: UploadLimits): UploadInspection {
  const unread = checkSize(bytes, limits) ?? checkBinary(bytes);
  if (unread) return unread;
  const decoded = decodeText(bytes);
  if (!decoded.ok) return decoded;
  const { text } = decoded;
  const notText = checkNul(text);
  if (notText) return notText;
  const header = readHeader(text);
  if (!header.ok) return header;
  const { delimiter, columns } = header;
  const badColumns = checkColumns(columns);
  if (badColumns) return badColumns;
  const parsed = parseRows(text, delimiter);
  if (!parsed.ok) return parsed;
  const { rows } = parsed;
  return checkRowCount(rows, limits) ?? { ok: true, delimiter, rows, columns };
}
