import { z } from "zod";

/**
 * The job kinds and their queues, with the payload each carries. The payload only points at the
 * Job row: the row is the truth a person sees, the queue job is the delivery.
 */
export const QUEUES = {
  imports: { kinds: ["csv_import"] },
} as const;

export type QueueName = keyof typeof QUEUES;
export const QUEUE_NAMES = Object.keys(QUEUES) as QueueName[];

export const JOB_KINDS = ["csv_import"] as const;
export type JobKind = (typeof JOB_KINDS)[number];

export const jobPayloadSchema = z.object({ jobId: z.uuid() }).strict();
export type JobPayload = z.infer<typeof jobPayloadSchema>;

export const KIND_QUEUE: Record<JobKind, QueueName> = { csv_import: "imports" };
