import type { Job as QueueJob } from "bullmq";
import type { Prisma } from "@/lib/db/client";
import type { FinalRow } from "@/lib/jobs/messages";
import type { ItemLoop } from "./for-each-item";
import type { RunStart } from "./attempt";
import type { Logger } from "@/lib/log";

/** What a processor is given and returns; the runtime (./run-job.ts, ./deadline.ts) runs it under the deadline policy. */

export interface RunContext {
  run: RunStart;
  /**
   * Aborts at the soft limit (reason: `DeadlineExceeded`), when the worker stops (reason:
   * `WorkerShutdown`) or when an operator cancels the job (reason: `JobCancelled`). Pass it to
   * everything awaited.
   */
  signal: AbortSignal;
  log: Logger;
  queueJob: QueueJob;
  /** Ready-made for `forEachItem`: this attempt, its cursor and signal. */
  loop: ItemLoop;
}

export interface RunResult {
  /** The terminal message; built from the committed row counts when a function. */
  message?: string | ((row: FinalRow) => string);
  /** What the job produced, kept on the row. */
  result?: Prisma.InputJsonValue;
}

// biome-ignore lint/suspicious/noConfusingVoidType: a processor that only writes its items returns nothing; `undefined` would make every one of them `return undefined`
export type Processor = (ctx: RunContext) => Promise<RunResult | void>;

/** Lets a watchdog outside the event loop enforce the hard limit on a processor that blocks it. */
export interface HardLimitWatch {
  start(run: { jobId: string; attempt: number; hardAt: number; kind: string }): void;
  end(jobId: string): void;
}
