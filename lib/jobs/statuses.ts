import type { JobStatus } from "@/generated/prisma/enums";

export type { JobStatus };

export const JOB_STATUSES = [
  "queued",
  "running",
  "delayed",
  "completed",
  "completed_with_errors",
  "timed_out",
  "killed",
  "failed",
  "abandoned",
  "cancelled",
] as const satisfies readonly JobStatus[];

export const TERMINAL_STATUSES = [
  "completed",
  "completed_with_errors",
  "timed_out",
  "killed",
  "failed",
  "abandoned",
  "cancelled",
] as const satisfies readonly JobStatus[];

export function isTerminal(status: JobStatus): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export const STATUS_LABEL: Record<JobStatus, string> = {
  queued: "Queued",
  running: "Running",
  delayed: "Waiting",
  completed: "Completed",
  completed_with_errors: "Completed with errors",
  timed_out: "Timed out",
  killed: "Stopped",
  failed: "Failed",
  abandoned: "Abandoned",
  cancelled: "Cancelled",
};
