import { z } from "zod";

/** One (queue, kind) budget as a worker process resolved it from its own environment. */
const publishedBudgetSchema = z.object({
  queue: z.string(),
  kind: z.string(),
  softMs: z.number(),
  hardMs: z.number(),
  source: z.string(),
  why: z.string(),
});

/**
 * What a worker process publishes in Redis: who it is and the budgets it really uses. Parsed
 * on read, because another process (possibly another version) wrote it.
 */
export const workerBudgetsSchema = z.object({
  host: z.string(),
  pid: z.number().int(),
  startedAt: z.iso.datetime(),
  publishedAt: z.iso.datetime(),
  timeScale: z.number().positive(),
  concurrency: z.number().int(),
  queues: z.array(z.string()),
  budgets: z.array(publishedBudgetSchema),
});
export type WorkerBudgets = z.infer<typeof workerBudgetsSchema>;
