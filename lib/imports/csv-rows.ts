import { Readable } from "node:stream";
import { parse } from "csv-parse";
import { REQUIRED_COLUMNS } from "./inspect-upload";
import { rowProblem, transactionRowSchema, type TransactionRow } from "./rows";
import type { StoredUpload } from "./stored-upload";

/**
 * The upload's records, header first — read the same way wherever rows are numbered (the import,
 * the batch lane's look ahead, the result file), so a row has one number everywhere: the header
 * is row 1, a quoted multi-line field stays one row, blank lines are not rows.
 */
export function uploadRecords(upload: StoredUpload): AsyncIterable<string[]> {
  return Readable.from(parserSlices(upload.bytes()), { objectMode: false }).pipe(
    parse({
      bom: true,
      delimiter: upload.delimiter,
      relax_column_count: true,
      skip_empty_lines: true,
      skip_records_with_empty_values: true,
    }),
  ) as AsyncIterable<string[]>;
}

/**
 * Bytes handed to the parser at a time. Given a large piece at once, the parser would turn all of
 * its rows into records before the first was read (its output buffer takes whatever one write
 * makes): a worker's memory would grow with the piece. In slices, it parses ahead only as far as
 * the reader has come (its buffer's high-water mark).
 */
const PARSE_SLICE_BYTES = 16 * 1024;

async function* parserSlices(pieces: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): AsyncGenerator<Buffer> {
  for await (const piece of pieces) {
    const bytes = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    for (let at = 0; at < bytes.byteLength; at += PARSE_SLICE_BYTES) yield bytes.subarray(at, at + PARSE_SLICE_BYTES);
  }
}

/** One data row of the upload: its position (1 = the first after the header), its spreadsheet row, and its fields. */
export interface UploadRow {
  index: number;
  row: number;
  record: string[];
}

/** The upload's data rows, with the header's columns (trimmed, lower-cased) beside each. */
export async function* uploadRows(upload: StoredUpload): AsyncGenerator<UploadRow & { columns: string[] }> {
  let columns: string[] | undefined;
  let index = 0;
  for await (const record of uploadRecords(upload)) {
    if (!columns) {
      columns = record.map((c) => c.trim().toLowerCase());
      continue;
    }
    index += 1;
    yield { index, row: index + 1, record, columns };
  }
}

/** A row read against its header: the transaction it holds, or what is wrong with it (the words the customer reads). */
export type CheckedRow = { ok: true; transaction: TransactionRow } | { ok: false; problem: string };

/** Validates one record against the header's columns: its field count, then each field (lib/imports/rows.ts). */
export function checkRow(record: string[], columns: string[]): CheckedRow {
  if (record.length !== columns.length)
    return {
      ok: false,
      problem: `row has ${record.length} field${record.length === 1 ? "" : "s"}, expected ${columns.length}`,
    };
  const parsed = transactionRowSchema.safeParse(
    Object.fromEntries(REQUIRED_COLUMNS.map((c) => [c, record[columns.indexOf(c)]])),
  );
  return parsed.success ? { ok: true, transaction: parsed.data } : { ok: false, problem: rowProblem(parsed.error) };
}

/** A transaction as the model is asked about it: the amount in major units ("-12.50"). */
export function questionOf(tx: TransactionRow): Omit<TransactionRow, "amount"> & { amount: string } {
  return { ...tx, amount: (Number(tx.amount) / 100).toFixed(2) };
}
