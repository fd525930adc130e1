import { formatCount } from "@/lib/format/number";
import { db } from "@/lib/db/client";
import { getJobAnswerReuse } from "@/lib/answers/stats";
import { routeFor } from "@/lib/model-providers";
import { formatDuration } from "@/lib/format/duration";
import {
  SERVICE_WAIT_EVENT,
  serviceWaitSentence,
  serviceWaitsOf,
  type ServiceWait,
} from "@/lib/diagnosis/service-waits";
import { countLabel, SEE_THE_LIST } from "@/lib/jobs/messages";
import { getProgress, isProgressToken, type Progress } from "@/lib/job-views/queries";
import { MARKED_FAILED_PREFIX } from "@/lib/diagnosis/resume-policy";
import { HANDLED_EVENT, scheduledAutoResume } from "@/lib/diagnosis/awaiting-operator";
import type { JobStatus } from "@/lib/core/job-statuses";

/**
 * What the customer reads about their own job: plain sentences made from the status and the
 * counts. `Job.message` is written for the operators (budgets, limits, parts, advice to split)
 * and is never passed through; the operator reads it on the job page.
 */

/** Words a customer is never shown: how the work is run, not what it does for them. */
export const OPERATOR_WORDS =
  /split|p99|budget|admin|soft|hard limit|reaper|attempt|cursor|tenant|worker|queue|fenc|watchdog|heartbeat|stuck/i;

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
  card_generation: {
    done: "generated",
    notDone: "could not be generated",
    doing: "Generating",
    thing: "the generation",
  },
};
const GENERIC: KindWords = {
  done: "processed",
  notDone: "could not be processed",
  doing: "Processing",
  thing: "the work",
};

const wordsOf = (kind: string): KindWords => WORDS[kind] ?? GENERIC;
/** Kinds whose customer sent a file: "you don't need to upload again". */
const UPLOADED: ReadonlySet<string> = new Set(["csv_import", "bulk_ocr"]);
const capital = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** The badge of a job delayed for an outside service that is down: no telling how long. */
export const WAITING_FOR_SERVICE_LABEL = "Waiting for a service";

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
  /** While queued or waiting in *delayed*: why it waits, as the progress query worded it (no operator words). */
  waitMessage?: string | null;
  /**
   * An ended job the platform resumes by itself (lib/diagnosis/resume-policy.ts, `outside_service`):
   * when. Only then does a job that ended short read "it continues by itself".
   */
  continuesAt?: Date | null;
  /**
   * An operator marked the ended job handled (lib/diagnosis/awaiting-operator.ts: it left the awaiting
   * group, nobody is asked to continue it any more), so "our team will continue it" is no longer true.
   */
  handled?: boolean;
  /** The retention pass removed its failures with its detail: no list to point at any more. */
  failuresRemoved?: boolean;
  /**
   * The job's batch at the provider's batch service (lib/runs/batch-lane.ts), when it took the
   * batch lane: while it waits, when it is expected and when the rest is finished directly.
   */
  batch?: CustomerBatch | null;
}

/** What the customer is told of a job's batch (the `JobBatch` row). */
export interface CustomerBatch {
  rows: number;
  expectedBy: Date;
  lastMomentAt: Date;
  deadlineAt: Date;
  endedAt: Date | null;
  /** Why it stopped waiting and finishes directly; null while waiting or once the batch completed. */
  fallback: string | null;
}

/** "14:05 UTC" */
const utc = (d: Date) => `${d.toISOString().slice(11, 16)} UTC`;

/** The sentence of a job whose rows are with the batch service, or that finishes directly after it. */
function batchSentence(p: CustomerSentenceInput, b: CustomerBatch): string | null {
  if (p.status === "delayed" && b.endedAt === null) {
    // Every row not done yet waits on the batch, though only one row of each question is in it (`b.rows`).
    const left = p.total === null ? null : Math.max(0, p.total - p.processed - p.failed);
    const rows = left === null ? `${p.noun}s` : countLabel(left, p.noun);
    return `Your ${left === null ? "" : "remaining "}${rows} ${left === 1 ? "is" : "are"} with the provider's batch service, expected by ${utc(b.expectedBy)}. Whatever it has not answered by ${utc(b.lastMomentAt)} is finished directly, so that ${wordsOf(p.kind).thing} is done by ${utc(b.deadlineAt)}. It goes on by itself; this page updates when it does.`;
  }
  if (p.status === "running" && b.fallback !== null)
    return `The provider's batch service did not answer every ${p.noun} in time: its answers are kept, and the rest is finishing directly, to be done by ${utc(b.deadlineAt)}.`;
  return null;
}

export interface CustomerSentence {
  /** What is happening or what happened. */
  message: string;
  /** What happens next, when the customer should know it (something failed, or it stopped early). */
  next: string | null;
}

/** "340 of 1,772 rows", or "340 rows" while the total is not known. */
function outOf(done: number, total: number | null, noun: string): string {
  return total === null ? countLabel(done, noun) : `${formatCount(done)} of ${countLabel(total, noun)}`;
}

/** The next step of a job that stopped short: what is kept, what is left, and who continues it. */
function resumeSentence(p: CustomerSentenceInput, w: KindWords, remaining: number | null): string {
  // Every cause a short ending (timed out, stopped, failed, abandoned) can have waits for a person
  // (lib/diagnosis/resume-policy.ts: OPERATOR_STATUSES), who is told — the stuck page,
  // bounded_jobs_awaiting_operator and its alert — so that is what the customer reads, never "it
  // continues by itself"; resume-policy.integration.test.ts holds it to what the platform then does.
  const kept =
    p.processed > 0 ? `Nothing is lost: the ${countLabel(p.processed, p.noun)} already ${w.done} are kept. ` : "";
  const left = remaining === null ? `the remaining ${p.noun}s` : `the remaining ${countLabel(remaining, p.noun)}`;
  const again = UPLOADED.has(p.kind) ? "you don't need to upload again" : "you don't need to start it again";
  if (p.handled) return `${kept}Our team has looked into it and closed it: nothing more will be done with it.`;
  if (p.continuesAt) {
    const at = p.continuesAt.toISOString().slice(11, 16);
    return `${kept}It continues by itself at about ${at} UTC, from where ${w.thing} stopped with ${left}, without doing any ${p.noun} twice: an outside service it needs kept failing and gets a few minutes to recover. You don't need to do anything; this page updates by itself when it goes on.`;
  }
  return `${kept}Our team has been told and will continue it; ${again}. It goes on from where ${w.thing} stopped with ${left}, without doing any ${p.noun} twice, and this page updates by itself when it does.`;
}

/** The sentence of a queued job: in line, or resuming where it stopped with what is left. */
function queuedSentence(
  p: CustomerSentenceInput,
  w: KindWords,
  done: number,
  remaining: number | null,
): CustomerSentence {
  if (done === 0) return { message: p.waitMessage ?? "In line: it starts shortly.", next: null };
  const left = remaining === null ? `the remaining ${p.noun}s` : countLabel(remaining, p.noun);
  const kept = p.processed > 0 ? ` The ${countLabel(p.processed, p.noun)} already ${w.done} are kept.` : "";
  return {
    message: `Resuming where it stopped: ${left} to go${p.waitMessage ? `. ${p.waitMessage}` : ", starting shortly."}${kept}`,
    next: null,
  };
}

/** The sentence of a completed job (with errors or not), and how to fix what was not done. */
function completedSentence(p: CustomerSentenceInput, w: KindWords, done: number): CustomerSentence {
  const fixable =
    p.kind === "csv_import"
      ? "Download the rows that could not be imported below: each has a reason column. Fix them and upload that file again."
      : `The list below says why each ${p.noun} ${w.notDone}.`;
  if (done === 0) return { message: "Done: there was nothing to do.", next: null };
  if (p.failed > 0 && p.failuresRemoved)
    return {
      message: `${capital(w.done)} ${formatCount(p.processed)} of ${countLabel(done, p.noun)}; ${countLabel(p.failed, p.noun)} ${w.notDone}.`,
      next: `The list of the ${p.noun}s that ${w.notDone} was removed with this job's details; send them again as a new job if you still need them.`,
    };
  if (p.failed === 0)
    return {
      message:
        done === 1 ? `${capital(w.done)} the 1 ${p.noun}.` : `${capital(w.done)} all ${countLabel(done, p.noun)}.`,
      next: null,
    };
  return {
    message: `${capital(w.done)} ${formatCount(p.processed)} of ${countLabel(done, p.noun)}; ${countLabel(p.failed, p.noun)} ${w.notDone}${SEE_THE_LIST}.`,
    next: fixable,
  };
}

/** The sentence and the next step for every status, from the counts alone. */
export function customerSentence(p: CustomerSentenceInput): CustomerSentence {
  const w = wordsOf(p.kind);
  const done = p.processed + p.failed;
  const remaining = p.total === null ? null : Math.max(0, p.total - done);
  const problems = p.failed > 0 ? `; ${countLabel(p.failed, p.noun)} ${w.notDone}` : "";
  const resume = (): string => resumeSentence(p, w, remaining);
  switch (p.status) {
    case "queued":
      return queuedSentence(p, w, done, remaining);
    case "running":
      return {
        message: `${w.doing} your ${p.noun}s: ${outOf(done, p.total, p.noun)} done so far${problems}.${p.batch && batchSentence(p, p.batch) ? ` ${batchSentence(p, p.batch)}` : ""}`,
        next: p.failed > 0 ? fixLater(p.kind, p.noun, w) : null,
      };
    case "delayed":
      return {
        message:
          (p.batch && batchSentence(p, p.batch)) ??
          p.waitMessage ??
          "Paused for a moment while an outside service catches up; it goes on by itself.",
        next: null,
      };
    case "completed":
    case "completed_with_errors":
      return completedSentence(p, w, done);
    case "timed_out":
      return {
        message: `Paused after ${outOf(done, p.total, p.noun)}: this took longer than expected${problems}.`,
        next: resume(),
      };
    case "killed":
    case "abandoned":
      return { message: `Stopped unexpectedly after ${outOf(done, p.total, p.noun)}${problems}.`, next: resume() };
    case "failed":
      return {
        message: `Something went wrong on our side after ${outOf(done, p.total, p.noun)}${problems}.`,
        next: resume(),
      };
    case "cancelled":
      return {
        message: `Cancelled after ${outOf(done, p.total, p.noun)}.`,
        next:
          p.processed > 0
            ? `The ${countLabel(p.processed, p.noun)} already ${w.done} are kept; nothing more will be done.`
            : "Nothing more will be done.",
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
  return OPERATOR_WORDS.test(reason)
    ? `this ${noun} could not be processed; please check it and send it again`
    : reason;
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
  /**
   * When the work waited for an outside service that was down (lib/diagnosis/service-waits.ts), each
   * with its sentence ("Waited for the model service from 14:02:10 to 14:07:31 UTC (5 min 21 s).").
   */
  serviceWaits: (ServiceWait & { sentence: string })[];
  /**
   * While it is delayed for an outside service that is down, that service ("the model service"):
   * its wake-up is only the next look at the service, no time left, and no brief pause.
   */
  waitsForService: string | null;
  /**
   * Rows answered by another model than the main provider's (a fallback on the kind's route, while
   * the main one was down), in plain words; null when every row got the main model's answer.
   */
  otherModels: string | null;
}

/** "2 of 88 rows were answered by a backup model (bounded-sim-backup-1) instead of the main one." — or null. */
export function otherModelsSentence(
  byModel: readonly { model: string; rows: number }[],
  mainModel: string,
  noun = "row",
): string | null {
  const others = byModel.filter((m) => m.model !== mainModel);
  if (others.length === 0) return null;
  const rows = others.reduce((sum, m) => sum + m.rows, 0);
  const all = byModel.reduce((sum, m) => sum + m.rows, 0);
  const names = others.map((m) => m.model).join(", ");
  const counted =
    rows === all
      ? `All ${formatCount(all)} ${noun}s were`
      : `${formatCount(rows)} of ${formatCount(all)} ${noun}s ${rows === 1 ? "was" : "were"}`;
  return `${counted} answered by ${others.length === 1 ? "a backup model" : "backup models"} (${names}) instead of the main one.`;
}

/** The time left of a job waiting on its batch: to the batch's expected time, or once that passed to the deadline. */
function batchTimeLeft(
  batch: CustomerBatch,
  now: Date,
): Pick<Progress, "waitSeconds" | "etaSeconds" | "expectedFinishAt"> {
  const by = batch.expectedBy > now ? batch.expectedBy : batch.deadlineAt;
  return {
    waitSeconds: undefined,
    etaSeconds: Math.max(1, Math.round((by.getTime() - now.getTime()) / 1000)),
    expectedFinishAt: by.toISOString(),
  };
}

/** The customer view of a progress query's answer. */
export function toCustomerProgress(
  p: Progress,
  kind: string,
  token: string,
  continuesAt: Date | null = null,
  handled = false,
  batch: CustomerBatch | null = null,
  now = new Date(),
): CustomerProgress {
  const { message: _operatorMessage, failures, ...rest } = p;
  const withBatch = p.status === "delayed" && batch !== null && batch.endedAt === null;
  const sentence = customerSentence({
    kind,
    noun: p.noun,
    status: p.status,
    total: p.total,
    processed: p.processed,
    failed: p.failed,
    // Why it waits, in the customer's words (lib/diagnosis/blocked-by-customer.ts), else the wait the progress
    // query worded.
    waitMessage: p.waiting ?? (p.waitSeconds !== undefined ? p.message : null),
    continuesAt,
    handled,
    batch,
    failuresRemoved: p.removedByRetention !== null && p.failures.length === 0,
  });
  const downloads =
    kind === "csv_import" && p.terminal && p.processed + p.failed > 0 && !p.removedByRetention
      ? {
          result: p.processed > 0 ? `/api/progress/${token}/result.csv` : null,
          failedRows: p.failed > 0 ? `/api/progress/${token}/failed-rows.csv` : null,
        }
      : null;
  return {
    ...rest,
    // While its rows are with the batch service, the job's next look at the batch (`waitSeconds`)
    // is no time left: the batch's expected time is, then (once passed) the deadline it keeps.
    ...(withBatch ? batchTimeLeft(batch, now) : {}),
    ...sentence,
    // Hours with the batch service are no brief pause.
    statusLabel: withBatch ? "With the batch service" : CUSTOMER_STATUS_LABEL[p.status],
    failures: failures.map((f) => ({ row: f.row, reason: customerReason(f.reason, p.noun) })),
    downloads,
    serviceWaits: [],
    waitsForService: null,
    otherModels: null,
  };
}

/** The progress page's and the public API's answer for a progress link; null for a link that opens no job. */
export async function getCustomerProgress(token: string, now = new Date()): Promise<CustomerProgress | null> {
  if (!isProgressToken(token)) return null;
  // Both by the link, at once: one round trip's wait instead of two.
  const [progress, job] = await Promise.all([
    getProgress(token, now),
    db().job.findUnique({
      where: { progressToken: token },
      select: {
        id: true,
        kind: true,
        status: true,
        attemptStartedAt: true,
        batch: {
          select: { rows: true, expectedBy: true, lastMomentAt: true, deadlineAt: true, endedAt: true, fallback: true },
        },
        events: {
          where: { type: { in: [SERVICE_WAIT_EVENT, "started", "delayed", HANDLED_EVENT] } },
          select: { at: true, type: true, attempt: true, message: true },
          orderBy: { at: "desc" },
          take: 500,
        },
      },
    }),
  ]);
  if (!progress || !job) return null;
  const serviceWaits = serviceWaitsOf(job.events, job.attemptStartedAt).map((w) => ({
    ...w,
    sentence: serviceWaitSentence(w, formatDuration),
  }));
  // Something scheduled to continue it (lib/diagnosis/resume-policy.ts): only then "it continues by itself".
  const continuesAt = job.status === "failed" ? await scheduledAutoResume(job.id) : null;
  // Closed by a person since it last ended — marked handled (a `handled` event after its end; a
  // retry since would have reopened it) or marked failed from the stuck page — nobody is asked to
  // continue it any more (lib/diagnosis/resume-policy.ts: neither awaits an operator).
  const endedAt = progress.terminal && progress.finishedAt ? Date.parse(progress.finishedAt) : null;
  const handled =
    endedAt !== null &&
    (job.events.some((e) => e.type === HANDLED_EVENT && e.at.getTime() >= endedAt) ||
      (job.status === "failed" && (progress.message ?? "").startsWith(MARKED_FAILED_PREFIX)));
  const customer = {
    ...toCustomerProgress(progress, job.kind, token, continuesAt, handled, job.batch, now),
    otherModels:
      job.kind === "csv_import"
        ? otherModelsSentence((await getJobAnswerReuse(job.id)).byModel, routeFor(job.kind)[0]!.model, progress.noun)
        : null,
  };
  const open = customer.status === "delayed" ? serviceWaits.find((w) => w.to === null) : undefined;
  if (!open) return { ...customer, serviceWaits };
  return { ...customer, serviceWaits, statusLabel: WAITING_FOR_SERVICE_LABEL, waitsForService: open.serviceName };
}
