import { db } from "@/lib/db/client";
import { uploadRecords } from "./csv-rows";
import { storedUpload } from "./stored-upload";
import { customerReason } from "@/lib/progress/customer-progress";
import { isTerminal, type JobStatus } from "@/lib/core/job-statuses";
import { progressLinkNotFoundMessage, removedByRetentionMessage } from "@/lib/jobs/messages";

/**
 * An import's results as CSV files the customer downloads: the categorised rows, and the rows
 * that failed — as uploaded, plus a `reason` column — ready to be fixed and uploaded again.
 * Both are streamed a page at a time, so a 12,000-row import is never held in memory whole.
 */

const PROGRESS_TOKEN = /^[0-9a-f]{32}$/;
/** Rows read from the database per page of the stream. */
export const PAGE_ROWS = 500;
/** Spreadsheets open a UTF-8 file as UTF-8 only with it; the importer accepts it. */
const BOM = "\uFEFF";

export const RESULT_COLUMNS = ["row", "date", "amount", "currency", "counterparty", "description", "category"] as const;
/** The column added to the failed rows; an upload that already has it (a re-upload) gets it rewritten, not doubled. */
export const REASON_COLUMN = "reason";

/** A plain number ("-12.50", "1.234,56"): a spreadsheet reads it as a number, never as a formula. */
const NUMBER = /^[+-]?\d[\d.,]*$/;

/**
 * One CSV cell. Quoted when it holds the delimiter, a quote or a line break (quotes doubled).
 * A cell a spreadsheet would run as a formula (starting with = + - @, a tab or a CR) gets a
 * leading apostrophe — unless it is a plain number such as "-12.50", which must stay importable.
 * The apostrophe stays in the cell on a re-upload: a formula is never imported as one.
 */
export function csvCell(value: string, delimiter = ","): string {
  let v = value;
  if (/^[=+\-@\t\r]/.test(v) && !NUMBER.test(v)) v = `'${v}`;
  return v.includes(delimiter) || /["\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v;
}

export function csvLine(cells: readonly string[], delimiter = ","): string {
  return `${cells.map((c) => csvCell(c, delimiter)).join(delimiter)}\r\n`;
}

/** "-1250" minor units → "-12.50". */
export function formatMinor(minor: bigint): string {
  const sign = minor < 0n ? "-" : "";
  const abs = minor < 0n ? -minor : minor;
  return `${sign}${abs / 100n}.${String(abs % 100n).padStart(2, "0")}`;
}

export interface ImportDownloadJob {
  id: string;
  status: JobStatus;
  filename: string;
}

export type DownloadLookup =
  | { ok: true; job: ImportDownloadJob }
  | { ok: false; status: 404 | 409 | 410; code: string; message: string };

/** The import a progress link opens, if its results can be downloaded: the link is the only key. */
export async function importForDownload(token: string): Promise<DownloadLookup> {
  const missing = {
    ok: false as const,
    status: 404 as const,
    code: "not_found",
    message: progressLinkNotFoundMessage(),
  };
  if (!PROGRESS_TOKEN.test(token)) return missing;
  const job = await db().job.findUnique({
    where: { progressToken: token },
    select: {
      id: true,
      kind: true,
      status: true,
      detailPrunedAt: true,
      resultsPrunedAt: true,
      tenant: { select: { resultsRetainDays: true } },
      upload: { select: { filename: true } },
    },
  });
  if (!job) return missing;
  // Both files are built from the upload and the imported rows: either gone, nothing to build.
  const removed = removedByRetentionMessage({ ...job, resultsRetainDays: job.tenant.resultsRetainDays });
  if (removed) return { ok: false, status: 410, code: "removed_by_retention", message: removed };
  if (job.kind !== "csv_import" || !job.upload)
    return { ok: false, status: 404, code: "not_found", message: "This job has no file to download: only imports do." };
  if (!isTerminal(job.status))
    return {
      ok: false,
      status: 409,
      code: "not_finished",
      message: "The import is still running: its files can be downloaded once it has finished.",
    };
  return { ok: true, job: { id: job.id, status: job.status, filename: job.upload.filename } };
}

/** "january.csv" → "january-result.csv": ASCII only, for the plain `filename=` of the header. */
export function downloadFilename(uploaded: string, suffix: string): string {
  const base =
    uploaded
      .replace(/\.csv$/i, "")
      .replace(/[^A-Za-z0-9._-]+/g, "_")
      .replace(/^[._]+/, "")
      .slice(0, 100) || "import";
  return `${base}-${suffix}.csv`;
}

/** A split import's rows were written by its parts: the job's own id and its parts'. */
async function jobIdsOf(jobId: string): Promise<string[]> {
  const parts = await db().job.findMany({ where: { parentId: jobId }, select: { id: true } });
  return [jobId, ...parts.map((p) => p.id)];
}

/** Pages of lines, pulled one page at a time as the reader consumes them. */
function lineStream(
  first: string,
  nextPage: () => Promise<string | null>,
  onCancel?: () => void,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let started = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        controller.enqueue(encoder.encode(first));
        return;
      }
      const chunk = await nextPage();
      if (chunk === null) controller.close();
      else controller.enqueue(encoder.encode(chunk));
    },
    // A download given up half-way stops the reading too.
    cancel: onCancel,
  });
}

/** The categorised rows of an import, in row order: row, date, amount, currency, counterparty, description, category. */
export async function resultCsv(jobId: string, pageRows = PAGE_ROWS): Promise<ReadableStream<Uint8Array>> {
  const jobIds = await jobIdsOf(jobId);
  let after = 0;
  let done = false;
  return lineStream(BOM + csvLine(RESULT_COLUMNS), async () => {
    if (done) return null;
    const rows = await db().transaction.findMany({
      where: { jobId: { in: jobIds }, row: { gt: after } },
      select: {
        row: true,
        date: true,
        amountMinor: true,
        currency: true,
        counterparty: true,
        description: true,
        category: { select: { name: true } },
      },
      orderBy: { row: "asc" },
      take: pageRows,
    });
    if (rows.length < pageRows) done = true;
    if (rows.length === 0) return null;
    after = rows.at(-1)!.row;
    return rows
      .map((t) =>
        csvLine([
          String(t.row),
          t.date.toISOString().slice(0, 10),
          formatMinor(t.amountMinor),
          t.currency,
          t.counterparty,
          t.description,
          t.category.name,
        ]),
      )
      .join("");
  });
}

type RecordedFailure = { row: number; reason: string };

/** The failures recorded for an import and its parts, in row order, read a page at a time as they are reached. */
function failureCursor(jobId: string, pageRows: number) {
  const where = { OR: [{ jobId }, { job: { parentId: jobId } }] };
  let failures: RecordedFailure[] = [];
  let failuresAfter = 0;
  let failuresDone = false;
  return {
    /** The first failure not yet passed over (reading the next page when the current one is used up), or null. */
    async next(): Promise<RecordedFailure | null> {
      if (failures.length === 0 && !failuresDone) {
        failures = await db().jobItemFailure.findMany({
          where: { ...where, row: { gt: failuresAfter } },
          select: { row: true, reason: true },
          orderBy: { row: "asc" },
          take: pageRows,
        });
        if (failures.length < pageRows) failuresDone = true;
        if (failures.length > 0) failuresAfter = failures.at(-1)!.row;
      }
      return failures[0] ?? null;
    },
    /** Passes over the failure `next` returned. */
    skip(): void {
      failures.shift();
    },
  };
}

/** A failed row's cells with its reason: after all of them when it has too many, else in the reason column. */
function withReason(
  fields: readonly string[],
  reason: string,
  columns: { header: readonly string[]; outHeader: readonly string[]; reasonAt: number },
): string[] {
  const cells = [...fields];
  if (cells.length > columns.header.length) {
    // Too many fields: all are kept, the reason after them, so nothing the customer wrote is lost.
    cells.push(reason);
  } else {
    // Too few fields: padded, so the reason lands in its own column.
    while (cells.length < columns.outHeader.length) cells.push("");
    cells[columns.reasonAt] = reason;
  }
  return cells;
}

/**
 * The rows of an import that failed, exactly as uploaded (same columns, same order, same
 * delimiter), each with its reason in a `reason` column: fixed, the file is uploaded again as it
 * is — the importer ignores columns it does not need. The stored upload is read with the options
 * the import reads it with, so the row numbers are the ones the failures were recorded under; the
 * failures are read a page at a time and matched while the file streams by.
 */
export async function failedRowsCsv(jobId: string, pageRows = PAGE_ROWS): Promise<ReadableStream<Uint8Array>> {
  const upload = await storedUpload(jobId);
  if (!upload) throw new Error(`import ${jobId} has no stored upload`);
  const delimiter = upload.delimiter;
  const failures = failureCursor(jobId, pageRows);

  // Read as the import reads it (./csv-rows.ts): the same records, so the same row numbers.
  const records = uploadRecords(upload)[Symbol.asyncIterator]();

  const first = await records.next();
  const header = first.done ? [] : first.value;
  let reasonAt = header.findIndex((c) => c.trim().toLowerCase() === REASON_COLUMN);
  const outHeader = reasonAt === -1 ? [...header, REASON_COLUMN] : header;
  if (reasonAt === -1) reasonAt = header.length;
  const columns = { header, outHeader, reasonAt };
  let index = 0;
  let finished = false;

  return lineStream(
    BOM + csvLine(outHeader, delimiter),
    async () => {
      if (finished) return null;
      const lines: string[] = [];
      while (lines.length < pageRows) {
        let failure = await failures.next();
        if (!failure) break;
        const next = await records.next();
        if (next.done) break;
        index += 1;
        const row = index + 1; // the header is row 1, as in a spreadsheet and in the recorded failures
        // A failure under a row number the file does not reach again is passed over.
        while (failure && failure.row < row) {
          failures.skip();
          failure = await failures.next();
        }
        if (!failure) break;
        if (failure.row !== row) continue;
        lines.push(csvLine(withReason(next.value, customerReason(failure.reason, "row"), columns), delimiter));
        // One failure per job and row; a second one for the same row is not a second line.
        while ((await failures.next())?.row === row) failures.skip();
      }
      if (lines.length === 0) {
        finished = true;
        return null;
      }
      return lines.join("");
    },
    () => void records.return?.(),
  );
}
