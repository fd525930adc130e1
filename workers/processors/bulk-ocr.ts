import { formatCount } from "@/lib/format/number";
import { db } from "@/lib/db/client";
import { documentProblem } from "@/lib/documents/inspect-documents";
import { OcrError, ocrDocument } from "@/lib/documents/ocr-client";
import { documentLimits } from "@/lib/documents/settings";
import { summariseDocument } from "@/lib/documents/summarise";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { itemSourceOf } from "@/lib/jobs/parts";
import { countLabel, SEE_THE_LIST } from "@/lib/jobs/messages";
import { ModelCallError } from "@/lib/modelcalls/errors";
import type { Processor } from "@/lib/runs/processor";

/**
 * `bulk_ocr`: for each stored document (JobFile, numbered 1…n), OCR, then one model pass that
 * classifies and summarises it; the text and the summary are written on the JobFile together
 * with the job's advance. A document that cannot be read is that document's failure, recorded
 * with its number; the batch goes on. A new attempt resumes at the cursor.
 */
export const bulkOcr: Processor = async ({ run, signal, loop }) => {
  // Metadata only: the contents (up to 95 × 10 MiB) are read one document at a time.
  const files = await db().jobFile.findMany({
    where: { jobId: itemSourceOf(run) }, // a part of a split batch reads the documents of the job it was split from
    select: { id: true, index: true, filename: true, contentType: true },
    orderBy: { index: "asc" },
  });
  if (files.length === 0)
    throw new JobFailed("The uploaded documents are missing, so they cannot be read. Upload them again.");
  const { maxFileBytes } = documentLimits();
  const context = { queue: run.queue, jobKind: run.kind, jobId: run.jobId };

  await forEachItem(
    loop,
    files,
    async (file) => {
      const stored = await db().jobFile.findUnique({ where: { id: file.id }, select: { content: true } });
      if (!stored) throw new ItemError(`${file.filename}: the stored document is gone`);
      const bytes = new Uint8Array(stored.content);
      const problem = documentProblem(bytes, maxFileBytes);
      if (problem) throw new ItemError(`${file.filename} ${problem.reason}`);

      let text: string;
      try {
        ({ text } = await ocrDocument({ bytes, contentType: file.contentType, signal, context }));
      } catch (err) {
        // The service's reason for refusing this document ("the PDF is password-protected") is
        // the customer's to read; a service that kept failing is ours, said without its internals.
        if (err instanceof OcrError) {
          const refused = err.details.status !== undefined && err.details.status >= 400 && err.details.status < 500;
          throw new ItemError(
            `${file.filename}: could not be read: ${refused ? err.message : "the OCR service did not answer"}`,
          );
        }
        throw err;
      }
      if (text.trim() === "") throw new ItemError(`${file.filename}: no text could be recognised in it`);

      let summary: string;
      try {
        summary = await summariseDocument({ filename: file.filename, text, signal, context });
      } catch (err) {
        // Refused for good (its length, its content): the file's own; anything else is not (lib/runs/item-fault.ts).
        if (err instanceof ModelCallError && !err.retryable)
          throw new ItemError(
            `${file.filename}: was read but the model service refused to summarise it (HTTP ${err.status ?? "error"})`,
          );
        throw err;
      }
      if (!summary) throw new ItemError(`${file.filename}: was read but the model gave an empty summary`);
      return (tx) => tx.jobFile.update({ where: { id: file.id }, data: { text, summary }, select: { id: true } });
    },
    (index) => files[index - 1]!.index,
  );

  return {
    message: (row) => {
      const total = row.processed + row.failed;
      if (row.failed > 0) {
        return `Read ${formatCount(row.processed)} of ${countLabel(total, "document")}; ${countLabel(row.failed, "document")} could not be read${SEE_THE_LIST}.`;
      }
      return total === 1 ? "Read the 1 document." : `Read all ${countLabel(total, "document")}.`;
    },
  };
};
