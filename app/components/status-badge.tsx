import { STATUS_LABEL, type JobStatus } from "@/lib/core/job-statuses";

const TONE: Record<JobStatus, "ok" | "warn" | "bad" | "info" | "idle"> = {
  queued: "idle",
  running: "info",
  delayed: "info",
  completed: "ok",
  completed_with_errors: "warn",
  timed_out: "bad",
  killed: "bad",
  failed: "bad",
  abandoned: "bad",
  cancelled: "idle",
};

export function statusTone(status: JobStatus) {
  return TONE[status];
}

export function StatusBadge({ status }: { status: JobStatus }) {
  return (
    <span className={`badge ${TONE[status]}`} data-status={status}>
      {STATUS_LABEL[status]}
    </span>
  );
}
