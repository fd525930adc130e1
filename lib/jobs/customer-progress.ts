import { db } from "@/lib/db/client";
import { countLabel } from "./messages";
import { getProgress, type Progress } from "./queries";
import type { JobStatus } from "./statuses";

/**
 * What the customer reads about their own job: plain sentences made from the status and the
 * counts. `Job.message` is written for the operators (budgets, limits, parts, advice to split)
 * and is never passed through; the operator reads it on the job page.
 */

/** Words a customer is never shown: how the work is run, not what it does for them. */
export const OPERATOR_WORDS = /split|p99|budget|admin|soft|hard limit|reaper|attempt|cursor|tenant|worker|queue|fenc|watchdog|heartbeat|stuck/i;

interface KindWords {
  /** "rows imported", "documents read": the past participle for items done. */
  done: string;
  /** What a failed item could not be: "could not be imported". */
  notDone: string;
  /** The work while it runs: "Importing". */
  doing: string;
  /** The job as a thing: "the import". */
  thing: string;
}

const WORDS: Record<string, KindWords> = {
  csv_import: { done: "imported", notDone: "could not be imported", doing: "Importing", thing: "the import" },
  bulk_ocr: { done: "read", notDone: "could not be read", doing: "Reading", thing: "the reading of your documents" },
  agent_run: { done: "finished", notDone: "could not be finished", doing: "Working through", thing: "the run" },
  overdue_invoices: { done: "checked", notDone: "could not be checked", doing: "Checking", thing: "the check" },
  marketplace_sync: { done: "synced", notDone: "could not be synced", doing: "Syncing", thing: "the sync" },
  card_generation: { done: "generated", notDone: "could not be generated", doing: "Generating", thing: "the generation" },
};
const GENERIC: KindWords = { done: "processed", notDone: "could not be processed", doing: "Processing", thing: "the work" };

const wordsOf = (kind: string): KindWords => WORDS[kind] ?? GENERIC;
const n = (x: number) => x.toLocaleString("en-US");
const capital = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** The badge beside the title: what the status means to the customer. */
export const CUSTOMER_STATUS_LABEL: Record<JobStatus, string> = {
  queued: "Waiting to start",
  running: "In progress",
  delayed: "Paused briefly",
  completed: "Done",
  completed_with_errors: "Done, with problems",
  timed_out: "Not finished",
  killed: "Not finished",
  failed: "Not finished",
  abandoned: "Not finished",
  cancelled: "Cancelled",
};

export interface CustomerSentenceInput {
  kind: string;
  noun: string;
  status: JobStatus;
  total: number | null;
  processed: number;
  failed: number;
  /** While waiting in *delayed*: the wait sentence the progress query made (no operator words). */
  waitMessage?: string | null;
}

export interface CustomerSentence {
  /** What is happening or what happened. */
  message: string;
  /** What happens next, when the customer should know it (something failed, or it stopped early). */
  next: string | null;
}

/** "340 of 1,772 rows", or "340 rows" while the total is not known. */
function outOf(done: number, total: number | null, noun: string): string {
  return total === null ? countLabel(done, noun) : `${n(done)} of ${countLabel(total, noun)}`;
}

/** The sentence and the next step for every status, from the counts alone. */
export function customerSentence(p: CustomerSentenceInput): CustomerSentence {
  const w = wordsOf(p.kind);
  const done = p.processed + p.failed;
  const remaining = p.total === null ? null : Math.max(0, p.total - done);
  const problems = p.failed > 0 ? `; ${countLabel(p.failed, p.noun)} ${w.notDone}` : "";
  const fixable = p.kind === "csv_import"
    ? "Download the rows that could not be imported below: each has a reason column. Fix them and upload that file again."
    : `The list below says why each ${p.noun} ${w.notDone}.`;
  // For every way of stopping short: what is kept, what is left, and that it goes on from there.
  const resume = (): string => {
    const kept = p.processed > 0 ? `Nothing is lost: the ${countLabel(p.processed, p.noun)} already ${w.done} are kept. ` : "";
    const left = remaining === null ? `The remaining ${p.noun}s` : `The remaining ${countLabel(remaining, p.noun)}`;
    return `${kept}${left} will be resumed from where ${w.thing} stopped, without doing any ${p.noun} twice. You do not need to send anything again; this page updates by itself when it goes on.`;
  };
  switch (p.status) {
    case "queued": {
      if (done === 0) return { message: "In line: it starts shortly.", next: null };
      const left = remaining === null ? `the remaining ${p.noun}s` : countLabel(remaining, p.noun);
      const kept = p.processed > 0 ? ` The ${countLabel(p.processed, p.noun)} already ${w.done} are kept.` : "";
      return { message: `Resuming where it stopped: ${left} to go, starting shortly.${kept}`, next: null };
    }
    case "running":
      return { message: `${w.doing} your ${p.noun}s: ${outOf(done, p.total, p.noun)} done so far${problems}.`, next: p.failed > 0 ? fixLater(p.kind, p.noun, w) : null };
    case "delayed":
      return { message: p.waitMessage ?? "Paused for a moment while an outside service catches up; it goes on by itself.", next: null };
    case "completed":
    case "completed_with_errors": {
      if (done === 0) return { message: "Done: there was nothing to do.", next: null };
      if (p.failed === 0) return { message: done === 1 ? `${capital(w.done)} the 1 ${p.noun}.` : `${capital(w.done)} all ${countLabel(done, p.noun)}.`, next: null };
      return { message: `${capital(w.done)} ${n(p.processed)} of ${countLabel(done, p.noun)}; ${countLabel(p.failed, p.noun)} ${w.notDone} (see the list below).`, next: fixable };
    }
    case "timed_out":
      return { message: `Paused after ${outOf(done, p.total, p.noun)}: this took longer than expected${problems}.`, next: resume() };
    case "killed":
    case "abandoned":
      return { message: `Stopped unexpectedly after ${outOf(done, p.total, p.noun)}${problems}.`, next: resume() };
    case "failed":
      return { message: `Something went wrong on our side after ${outOf(done, p.total, p.noun)}${problems}.`, next: resume() };
    case "cancelled":
      return {
        message: `Cancelled after ${outOf(done, p.total, p.noun)}.`,
        next: p.processed > 0 ? `The ${countLabel(p.processed, p.noun)} already ${w.done} are kept; nothing more will be done.` : "Nothing more will be done.",
      };
  }
}

function fixLater(kind: string, noun: string, w: KindWords): string {
  return kind === "csv_import"
    ? "The rest goes on. When it is done you can download the rows that could not be imported, with the reason for each, fix them and upload that file again."
    : `The rest goes on; the list below says why each ${noun} ${w.notDone}.`;
}

/**
 * A failure's reason as the customer reads it. Row reasons are written for them ("date must look
 * like 2026-01-31"); one that talks about how the work is run is replaced, not shown.
 */
export function customerReason(reason: string, noun = "item"): string {
  return OPERATOR_WORDS.test(reason) ? `this ${noun} could not be processed; please check it and send it again` : reason;
}

export interface CustomerProgress extends Omit<Progress, "message" | "failures"> {
  /** What is happening, in plain words (never the operators' message). */
  message: string;
  /** What happens next, in plain words; null when there is nothing to add. */
  next: string | null;
  /** The badge's words. */
  statusLabel: string;
  failures: { row: number; reason: string }[];
  /** Import results to download once the job has finished (addresses relative to the site). */
  downloads: { result: string | null; failedRows: string | null } | null;
}

/** The customer view of a progress query's answer. */
export function toCustomerProgress(p: Progress, kind: string, token: string): CustomerProgress {
  const { message: _operatorMessage, failures, ...rest } = p;
  const sentence = customerSentence({ kind, noun: p.noun, status: p.status, total: p.total, processed: p.processed, failed: p.failed, waitMessage: p.waitSeconds !== undefined ? p.message : null });
  const downloads =
    kind === "csv_import" && p.terminal && p.processed + p.failed > 0
      ? {
          result: p.processed > 0 ? `/api/progress/${token}/result.csv` : null,
          failedRows: p.failed > 0 ? `/api/progress/${token}/failed-rows.csv` : null,
        }
      : null;
  return {
    ...rest,
    ...sentence,
    statusLabel: CUSTOMER_STATUS_LABEL[p.status],
    failures: failures.map((f) => ({ row: f.row, reason: customerReason(f.reason, p.noun) })),
    downloads,
  };
}

/** The progress page's and the public API's answer for a progress link; null for a link that opens no job. */
export async function getCustomerProgress(token: string, now = new Date()): Promise<CustomerProgress | null> {
  const progress = await getProgress(token, now);
  if (!progress) return null;
  const job = await db().job.findUnique({ where: { progressToken: token }, select: { kind: true } });
  if (!job) return null;
  return toCustomerProgress(progress, job.kind, token);
}
