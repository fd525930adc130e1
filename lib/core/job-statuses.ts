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

/** Statuses a job can still leave: queued for a worker, running, or waiting in *delayed*. */
export const OPEN_STATUSES = ["queued", "running", "delayed"] as const satisfies readonly JobStatus[];

export type TerminalStatus = Exclude<(typeof JOB_STATUSES)[number], (typeof OPEN_STATUSES)[number]>;

/** Every other status is final, in the order of `JOB_STATUSES`. */
export const TERMINAL_STATUSES: readonly TerminalStatus[] = JOB_STATUSES.filter(
  (s): s is TerminalStatus => !(OPEN_STATUSES as readonly JobStatus[]).includes(s),
);

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
