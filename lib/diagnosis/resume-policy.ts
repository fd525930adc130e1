import { isSplittable } from "@/lib/projection/projection";
import type { JobStatus, TerminalStatus } from "@/lib/core/job-statuses";

/**
 * Who resumes what, decided once. Every way a job can end is one `EndCause`, read from the row as
 * it ended (its status, its kind, whether it was split, and the message its finalizer wrote — the
 * words of lib/jobs/messages.ts, lib/runs/crash-resume.ts and the few finalizers that write their
 * own); `RESUME_POLICY` says for each whether the platform goes on by itself, a person must act
 * (and with which action), or nothing is left to resume. The customer's "what happens next"
 * (lib/progress/customer-progress.ts), the stuck page's "Awaiting an operator" group and the
 * `bounded_jobs_awaiting_operator` gauge all read it, so they cannot disagree.
 *
 * Causes outside the job mostly never end it: an outside service that is down, silent or
 * misconfigured makes a job wait in *delayed* and go on when it answers (lib/runs/reschedule.ts, the
 * breakers of lib/ratelimit); a PostgreSQL or Redis outage hands the run back to the queue
 * (lib/runs/classify.ts); a worker that dies has its run resumed from the cursor, up to
 * MAX_CRASH_RESUMES times (lib/runs/crash-resume.ts). Those are the platform's resumes while the
 * job is still open. One path still ends a job for an outside cause: a call the kind retries
 * itself (an image generation's phase, a marketplace page) that kept failing before the service's
 * breaker opened — the first jobs of an outage. That is `outside_service`, the one ending the
 * platform resumes by itself (`AUTO_RESUME`: bounded in count and age, through the operator's own
 * retry path, so exactly-once holds the same way); past the bound a person takes over. What is
 * left is the job's own: a budget or maximum age too small for the work, a run that ignored its
 * limits, an input or request it cannot get past, a worker killed with it more often than chance
 * explains, a queue nobody serves. Those wait for a person, who is told (gauge, alert, /stuck) —
 * never the customer's "it continues by itself".
 */

/** What a person does to continue a job that waits for one. */
export type OperatorAction = "retry_larger_budget" | "split" | "retry" | "retry_parts";

export const END_CAUSES = [
  "completed",
  "item_failures",
  "over_budget_splittable",
  "too_big_cannot_split",
  "max_age",
  "hard_limit",
  "crash_bound",
  "outside_service",
  "job_failed",
  "internal_error",
  "no_worker",
  "marked_failed",
  "parts_ended",
  "abandoned",
  "cancelled",
] as const;
export type EndCause = (typeof END_CAUSES)[number];

export interface ResumeRule {
  /**
   * Who continues a job that ended this way: nobody needs to (finished, or a person's choice), an
   * operator, or the platform by itself (within `AUTO_RESUME`; past it, an operator).
   */
  resumes: "nobody" | "operator" | "platform";
  /** For the operator: the action that continues it. */
  action: OperatorAction | null;
  /**
   * True when a job that ended this way waits on a person nobody has acted on yet: counted in
   * `bounded_jobs_awaiting_operator`, listed first on /stuck. False for an operator cause when
   * the ending itself was a person's act (marked failed), or when its parts are listed instead.
   */
  awaits: boolean;
  /** The cause in a few words, for the operator. */
  title: string;
  /** Why this resume rule: the reason a person (and not the platform) acts, or nobody. */
  why: string;
}

export const RESUME_POLICY: Record<EndCause, ResumeRule> = {
  completed: { resumes: "nobody", action: null, awaits: false, title: "Completed", why: "every item was done" },
  item_failures: {
    resumes: "nobody",
    action: null,
    awaits: false,
    title: "Completed with item failures",
    why: "the failed items are bad input: a retry would fail them again; the customer fixes and sends them (the failed-rows download says why each failed)",
  },
  over_budget_splittable: {
    resumes: "operator",
    action: "split",
    awaits: true,
    title: "Timed out on its budget",
    why: "the job was bigger or slower than its projection; its items are independent, so parts that each fit the budget finish it",
  },
  too_big_cannot_split: {
    resumes: "operator",
    action: "retry_larger_budget",
    awaits: true,
    title: "Too big for its budget (this kind cannot split)",
    why: "its steps depend on each other, so it cannot be split; only a larger budget (up to 4×) or a smaller task finishes it — a person chooses which",
  },
  max_age: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Past its maximum age",
    why: "it waited for rate-limit windows until its data would be staler than a fresh run's: a person decides whether to continue it or start afresh",
  },
  hard_limit: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Stopped at the hard limit",
    why: "the run ignored its soft limit or blocked its worker: running it again unattended would do the same",
  },
  crash_bound: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Its worker died too often",
    why: "the platform resumed it after each worker death up to the bound; more deaths than that point at the job itself (an input that exhausts memory, a crashing parser)",
  },
  outside_service: {
    resumes: "platform",
    action: "retry",
    awaits: true,
    title: "An outside service kept failing",
    why: "the service failed every retry of one call before its breaker opened: nothing in the job is wrong, so the platform resumes it by itself after a pause (AUTO_RESUME); once those resumes are spent it waits for a person (awaits, from then on)",
  },
  job_failed: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Failed on its own input",
    why: "the job cannot get past its input or request (missing upload, invalid parameters, a refusal): running it again unchanged fails the same way",
  },
  internal_error: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Failed on an internal error",
    why: "an unexpected error in the code: a person reads it (the job page, the logs) before running it again",
  },
  no_worker: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "No worker serves its queue",
    why: "nothing can run it until a worker consumes its queue: a deployment to fix, then a retry",
  },
  marked_failed: {
    resumes: "operator",
    action: "retry",
    awaits: false,
    title: "Marked failed by an operator",
    why: "a person ended it from /stuck: that person has acted, and retries it when they choose",
  },
  parts_ended: {
    resumes: "operator",
    action: "retry_parts",
    awaits: false,
    title: "Parts ended short",
    why: "a split job ends with its worst part; each part that ended short is listed itself, and its retry reopens this job",
  },
  abandoned: {
    resumes: "operator",
    action: "retry",
    awaits: true,
    title: "Abandoned by the reaper (before resumes)",
    why: "ended by the reaper of an earlier version, which abandoned instead of resuming: only a retry continues it",
  },
  cancelled: {
    resumes: "nobody",
    action: null,
    awaits: false,
    title: "Cancelled",
    why: "a person cancelled it on purpose",
  },
};

/** The statuses a job waiting on an operator can have (every other terminal status needs nobody). */
export const OPERATOR_STATUSES = [
  "timed_out",
  "killed",
  "failed",
  "abandoned",
] as const satisfies readonly TerminalStatus[];

/**
 * The finalizers' own words, as they begin. Built by lib/jobs/messages.ts (`timedOutMessage`,
 * `killedMessage`), lib/runs/crash-resume.ts (`crashStoppedMessage`), lib/runs/deferral-messages.ts (the
 * maximum age), lib/runs/classify.ts (an internal error), lib/runs/reaper.ts (no worker) and
 * lib/actions/mark-failed.ts (marked failed); resume-policy.integration.test.ts drives real jobs into
 * each ending, so a reworded finalizer turns it red rather than silently changing who resumes.
 */
const MAX_AGE = /^Timed out after .*would take it past its maximum age/s;
const CRASH_BOUND = /^Stopped after its worker died \d+ times/;
export const INTERNAL_ERROR_MESSAGE = "The job failed because of an internal error. An operator can retry it.";
export const NO_WORKER_PREFIX = "No worker consumes the queue";
export const MARKED_FAILED_PREFIX = "Marked failed by ";
/**
 * A failure only after the kind's own retries of a retryable answer (workers/processors/
 * card-generation-provider.ts: "the image provider's poll failed 3 times"; lib/marketplace/client.ts
 * with lib/http/outbound.ts's words: unreachable, no answer in time, a 5xx, a second 429), or a
 * render the image provider itself reports as failed on its side (it says nothing about the
 * request; the same request renders on another try). A refusal of the job's own request (a 4xx: a
 * prompt refused, an invalid body) or an answer that cannot be read is not one: that is `job_failed`.
 */
const OUTSIDE_SERVICE = [
  /^The card could not be generated: the image provider(?:'s \w+ failed \d+ times| could not render the card)/,
  /^Could not read page \d+ of [\w-]+: the marketplace (could not be reached|did not answer within|failed \(HTTP 5|answered HTTP 5|refused .* twice for its rate limit)/,
];

/**
 * How the platform resumes a job that ended for an outside service (`outside_service`): after a
 * pause that grows (the service had just failed every retry), at most `delaysMs.length` times, and
 * only while the job is younger than `maxAgeMs` — a customer whose card or sync is half a day late
 * is better served by a person. Production ms (scaled like every duration). Each resume is the
 * operator's retry (`reopenForRetry`: one statement, the cursor kept, the next start fences every
 * older run) written as an `auto_resumed` event; an operator's retry starts the count again.
 */
export const AUTO_RESUME = {
  delaysMs: [60_000, 5 * 60_000, 15 * 60_000] as readonly number[],
  maxAgeMs: 6 * 3_600_000,
  why: "1, 5 and 15 min span a service restart and a short incident; three resumes that all fail again are an incident a person must see",
} as const;

/** The timeline event of the platform's resume. */
export const AUTO_RESUMED_EVENT = "auto_resumed";

/**
 * When the platform resumes a job that ended for an outside service, in real time; null when it
 * will not (its resumes are spent, or it is too old): then it waits for a person.
 */
export function nextAutoResume(
  row: { finishedAt: Date; createdAt: Date; autoResumes: number },
  timeScale: number,
): Date | null {
  const delay = AUTO_RESUME.delaysMs[row.autoResumes];
  if (delay === undefined) return null;
  const at = new Date(row.finishedAt.getTime() + delay * timeScale);
  if (at.getTime() > row.createdAt.getTime() + AUTO_RESUME.maxAgeMs * timeScale) return null;
  return at;
}

export interface EndedRow {
  status: JobStatus;
  kind: string;
  /** The message its finalizer wrote (the row's, or its terminal timeline event's). */
  message: string | null;
  /** It was split into parts: it ends with them. */
  hasParts: boolean;
}

/** The cause of a terminal row's end; null for a job that is still open. */
export function endCauseOf(row: EndedRow): EndCause | null {
  const m = row.message ?? "";
  switch (row.status) {
    case "queued":
    case "running":
    case "delayed":
      return null;
    case "completed":
      return "completed";
    case "completed_with_errors":
      return row.hasParts ? "completed" : "item_failures";
    case "cancelled":
      return "cancelled";
    default:
      break;
  }
  if (row.hasParts) return "parts_ended";
  switch (row.status) {
    case "timed_out":
      if (MAX_AGE.test(m)) return "max_age";
      return isSplittable(row.kind) ? "over_budget_splittable" : "too_big_cannot_split";
    case "killed":
      return "hard_limit";
    case "abandoned":
      return "abandoned";
    case "failed":
      if (CRASH_BOUND.test(m)) return "crash_bound";
      if (m.startsWith(MARKED_FAILED_PREFIX)) return "marked_failed";
      if (m.startsWith(NO_WORKER_PREFIX)) return "no_worker";
      if (m === INTERNAL_ERROR_MESSAGE) return "internal_error";
      if (OUTSIDE_SERVICE.some((r) => r.test(m))) return "outside_service";
      return "job_failed";
  }
}

/** The rule for a terminal row; null while it is open. */
export function resumeRuleOf(row: EndedRow): (ResumeRule & { cause: EndCause }) | null {
  const cause = endCauseOf(row);
  return cause ? { cause, ...RESUME_POLICY[cause] } : null;
}

/** The action in the words of a button or a column. */
export const ACTION_LABEL: Record<OperatorAction, string> = {
  retry_larger_budget: "Retry with a larger budget",
  split: "Split into parts",
  retry: "Retry",
  retry_parts: "Retry its parts",
};
