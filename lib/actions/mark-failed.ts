import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { queue } from "@/lib/queues/queues";
import { QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import { BULK_RETRY_CAP } from "./bulk-retry";
import { progressPhrase } from "@/lib/jobs/messages";
import { finalizeJob } from "@/lib/runs/finalize";
import { retryJob } from "./retry";
import { describeRetry } from "./retry-messages";
import { MARKED_FAILED_PREFIX } from "@/lib/diagnosis/resume-policy";
import { markJobsHandled, type MarkHandledResult } from "./mark-handled";
import {
  CAUSE_ACTION,
  CAUSE_ACTIONS,
  CAUSE_TITLE,
  jobsOfCause,
  stuckCauseSchema,
  type StuckAction,
  type StuckCause,
} from "@/lib/diagnosis/stuck-causes";

/** A bulk action on a stuck group takes at most this many jobs, as a bulk retry does. */
export const STUCK_ACTION_CAP = BULK_RETRY_CAP;

/**
 * What a stuck group's bulk action is sent: the jobs the operator saw in the group, by id. An
 * explicit list, never "all": an empty one is refused (see `StuckActionResult`), not widened.
 * Ids are checked, not their count, here: above the cap the answer is a clear refusal.
 */
export const stuckSelectionSchema = z
  .object({
    jobIds: z
      .array(z.uuid({ error: "Each job id must be a UUID." }), {
        error: 'Send "jobIds": the ids of the jobs to act on.',
      })
      .max(100_000)
      .default([]),
    /** Why, in the operator's words: goes into each job's message. */
    reason: z.string().trim().max(300).optional(),
  })
  .strict();
export type StuckSelection = z.infer<typeof stuckSelectionSchema>;

export type StuckActionResult =
  | { type: "empty_selection" }
  | { type: "over_cap"; count: number; cap: number }
  | { type: "wrong_action"; cause: StuckCause; action: StuckAction }
  | {
      type: "done";
      action: StuckAction;
      cause: StuckCause;
      selected: number;
      done: number;
      refused: { jobId: string; reason: string }[];
    };

function checkSelection(cause: StuckCause, action: StuckAction, ids: string[]): StuckActionResult | null {
  if (ids.length === 0) return { type: "empty_selection" };
  if (ids.length > STUCK_ACTION_CAP) return { type: "over_cap", count: ids.length, cap: STUCK_ACTION_CAP };
  if (!CAUSE_ACTIONS[cause].includes(action)) return { type: "wrong_action", cause, action: CAUSE_ACTION[cause] };
  return null;
}

/** Removes a queue job that is waiting to start, so no worker takes a job that has ended; best effort (an active one is locked). */
async function dropQueueJob(queueName: string, id: string): Promise<void> {
  if (!(QUEUE_NAMES as string[]).includes(queueName)) return;
  const q = queue(queueName as QueueName);
  const job = await q.getJob(id).catch(() => undefined);
  if (job && job.data?.jobId === id) await job.remove().catch(() => undefined);
}

/**
 * Marks the selected jobs of an open stuck group `failed`, with a message naming who and why.
 * Each job is re-checked against the group first (a job that left it — started, heartbeating
 * again, finished — is refused with its state), then ended in one statement guarded by the
 * status and attempt it was seen with (`finalizeJob`), so a job that changed meanwhile is
 * refused rather than overwritten. A failed job can be retried from its cursor.
 */
export async function markStuckJobsFailed(
  cause: StuckCause,
  selection: StuckSelection,
  by: Principal,
): Promise<StuckActionResult> {
  const ids = [...new Set(selection.jobIds)];
  const refusal = checkSelection(cause, "fail", ids);
  if (refusal) return refusal;
  const inGroup = new Map((await jobsOfCause(cause, ids)).map((j) => [j.id, j]));
  const refused: { jobId: string; reason: string }[] = [];
  let done = 0;
  for (const id of ids) {
    const job = inGroup.get(id);
    if (!job) {
      refused.push({ jobId: id, reason: `It is no longer in "${CAUSE_TITLE[cause]}".` });
      continue;
    }
    const message = (row: Parameters<typeof progressPhrase>[0]) =>
      `${MARKED_FAILED_PREFIX}${by.username} from the stuck page after ${progressPhrase(row)} (${CAUSE_TITLE[cause].toLowerCase()}: ${job.why})${selection.reason ? `: ${selection.reason}` : ""}. Retry to continue from where it stopped.`;
    const status = await finalizeJob(id, job.attempt, { status: "failed", message, from: [job.status] });
    if (status !== "failed") {
      refused.push({ jobId: id, reason: "It changed state meanwhile; nothing was written." });
      continue;
    }
    done += 1;
    await dropQueueJob(job.queue, id);
  }
  return { type: "done", action: "fail", cause, selected: ids.length, done, refused };
}

/**
 * Retries the selected jobs awaiting an operator: each must still be waiting, then `retryJob`
 * (exactly once per job, resuming at its cursor, with the budget the workers resolve); the others
 * are refused with why. A larger budget or a split is chosen job by job, on its page.
 */
export async function retryStuckJobs(
  cause: StuckCause,
  selection: StuckSelection,
  by: Principal,
): Promise<StuckActionResult> {
  const ids = [...new Set(selection.jobIds)];
  const refusal = checkSelection(cause, "retry", ids);
  if (refusal) return refusal;
  const inGroup = new Set((await jobsOfCause(cause, ids)).map((j) => j.id));
  const refused: { jobId: string; reason: string }[] = [];
  let done = 0;
  for (const id of ids) {
    if (!inGroup.has(id)) {
      refused.push({ jobId: id, reason: `It is no longer in "${CAUSE_TITLE[cause]}".` });
      continue;
    }
    const r = await retryJob(id, by);
    if (r.type === "retried") done += 1;
    else refused.push({ jobId: id, reason: describeRetry(r).message });
  }
  return { type: "done", action: "retry", cause, selected: ids.length, done, refused };
}

export type StuckActionOutcome = StuckActionResult | { type: "unknown_cause"; message: string };

/** Marks the selected jobs awaiting an operator handled (lib/diagnosis/awaiting-operator.ts). */
export async function markStuckJobsHandled(
  cause: StuckCause,
  selection: StuckSelection,
  by: Principal,
): Promise<StuckActionResult> {
  const ids = [...new Set(selection.jobIds)];
  const refusal = checkSelection(cause, "handle", ids);
  if (refusal) return refusal;
  const r: MarkHandledResult = await markJobsHandled({ jobIds: ids, reason: selection.reason }, by);
  if (r.type !== "done") return r;
  return { type: "done", action: "handle", cause, selected: r.selected, done: r.done, refused: r.refused };
}

/** A bulk action named by the group in a path or a form: an unknown group is refused (404), never guessed. */
export async function runStuckAction(
  action: StuckAction,
  cause: string,
  selection: StuckSelection,
  by: Principal,
): Promise<StuckActionOutcome> {
  const parsed = stuckCauseSchema.safeParse(cause);
  if (!parsed.success)
    return { type: "unknown_cause", message: parsed.error.issues[0]?.message ?? "No such stuck group." };
  if (action === "fail") return markStuckJobsFailed(parsed.data, selection, by);
  if (action === "handle") return markStuckJobsHandled(parsed.data, selection, by);
  return retryStuckJobs(parsed.data, selection, by);
}
