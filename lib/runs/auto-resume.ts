import { db } from "@/lib/db/client";
import { metrics } from "@/lib/metrics/metrics";
import { env } from "@/lib/env";
import { queue, requeueJob } from "@/lib/queues/queues";
import { QUEUE_NAMES, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import { RETRY_PRIORITY } from "@/lib/queues/fairness";
import { endedRows } from "@/lib/diagnosis/awaiting-operator";
import { countLabel, nounOf } from "@/lib/jobs/messages";
import { reopenForRetry } from "@/lib/jobs/reopen";
import { AUTO_RESUME, AUTO_RESUMED_EVENT, nextAutoResume, resumeRuleOf } from "@/lib/diagnosis/resume-policy";

export interface AutoResumed {
  id: string;
  kind: string;
  /** Which resume this was (1 … AUTO_RESUME.delaysMs.length). */
  resume: number;
  message: string;
}

/**
 * The platform's own resumes (lib/diagnosis/resume-policy.ts, `AUTO_RESUME`): every job that ended for
 * an outside service and whose next resume is due goes back to its queue exactly as an operator's
 * retry puts it there (`reopenForRetry`, the cursor kept, ahead of fresh jobs), with an
 * `auto_resumed` event. Run by the reaper each pass; a job whose resume cannot be queued now stays
 * as it is for the next pass.
 */
export async function resumeOutsideServiceFailures(now = new Date()): Promise<AutoResumed[]> {
  const scale = env().BOUNDED_TIME_SCALE;
  const done: AutoResumed[] = [];
  for (const r of await endedRows()) {
    if (r.status !== "failed") continue;
    const rule = resumeRuleOf({ status: r.status, kind: r.kind, message: r.message, hasParts: false });
    if (rule?.resumes !== "platform") continue;
    const at = nextAutoResume(
      { finishedAt: r.finishedAt ?? r.updatedAt, createdAt: r.createdAt, autoResumes: r.autoResumes },
      scale,
    );
    if (!at || at > now || !(QUEUE_NAMES as string[]).includes(r.queue)) continue;
    // The run that failed may still be handing its queue job back (it is locked until then): the next pass resumes it.
    const { queueJobId } = await db().job.findUniqueOrThrow({ where: { id: r.id }, select: { queueJobId: true } });
    if (
      (await queue(r.queue as QueueName)
        .getJobState(queueJobId ?? r.id)
        .catch(() => "unreachable")) === "active"
    )
      continue;
    const resume = r.autoResumes + 1;
    const message = `Resumed by the platform (${resume} of ${AUTO_RESUME.delaysMs.length}) after an outside service kept failing: resumes after ${countLabel(r.cursor, nounOf(r.kind))} already done.`;
    if (
      !(await reopenForRetry({
        jobId: r.id,
        parentId: r.parentId,
        message,
        by: "the platform",
        eventType: AUTO_RESUMED_EVENT,
      }))
    )
      continue;
    try {
      await requeueJob(
        r.queue as QueueName,
        r.kind as JobKind,
        { jobId: r.id },
        { queueJobId: queueJobId ?? r.id, priority: RETRY_PRIORITY },
      );
    } catch {
      // Not queued now (Redis away, the old queue job still winding down): the reaper's next pass
      // finds the row queued without a queue job and queues it (./reaper.ts).
    }
    // Its failed finish was counted when it ended; it was not its outcome (the objective's ratios
    // in ops/prometheus/alerts.yml take it out again).
    metrics.jobsAutoResumed.inc({ kind: r.kind });
    done.push({ id: r.id, kind: r.kind, resume, message });
  }
  return done;
}
