import { z } from "zod";
import type { Budget } from "@/lib/budgets/budgets";
import { worstCaseMs } from "@/lib/quota/policy";

/**
 * The job catalog: every queue, every job kind, which queue runs it, and the budgets declared
 * in code (each with the reason for its number). Environment overrides and the global default
 * are applied by lib/budgets.
 */
export const QUEUES = {
  imports: { kinds: ["csv_import"] },
  documents: {
    kinds: ["bulk_ocr"],
    budget: {
      softMs: 30 * 60_000,
      hardMs: 40 * 60_000,
      why: "95 documents at the medians (OCR 2 s + one model pass 5.5 s) take ~12 min; 30 min leaves room for the tails (OCR p99 15 s, model p99 35 s)",
    },
  },
  "agent-batch": {
    kinds: ["agent_run"],
    budget: {
      softMs: 30 * 60_000,
      hardMs: 40 * 60_000,
      why: "nobody is waiting: room for ~40 model calls at the p99 of 35 s plus tool calls, yet a runaway agent is stopped within the hour",
    },
  },
  "agent-interactive": {
    kinds: ["agent_run"],
    budget: {
      softMs: 60_000,
      hardMs: 90_000,
      why: "a person is waiting on the screen: past a minute an answer is worth less than a clear 'this took too long'",
    },
  },
  sweeps: { kinds: ["overdue_invoices"] },
  "marketplace-sync": {
    kinds: ["marketplace_sync"],
    budget: {
      softMs: 10 * 60_000,
      hardMs: 15 * 60_000,
      why: "counts time in a worker slot only (a wait over 5 s gives the slot back): 100 pages at ~1 s per request plus short waits under the 5 s threshold fit in 10 min",
    },
  },
  generations: {
    kinds: ["card_generation"],
    budget: {
      // Computed, not copied: the generation's own timeouts (lib/quota/policy.ts) end it first.
      softMs: Math.ceil((worstCaseMs() * 1.25) / 60_000) * 60_000,
      hardMs: Math.ceil((worstCaseMs() * 1.25) / 60_000) * 60_000 + 5 * 60_000,
      why: "the worst case of one paid generation (every poll, download and QA attempt timing out, one regeneration: 960 s, lib/quota/policy.ts) plus a quarter, rounded up to the minute: the generation's own timeouts end it first, so the budget never cuts a generation that can still finish",
    },
  },
} as const satisfies Record<string, { kinds: readonly string[]; budget?: Budget }>;

export type QueueName = keyof typeof QUEUES;
export const QUEUE_NAMES = Object.keys(QUEUES) as QueueName[];

export const JOB_KINDS = ["csv_import", "bulk_ocr", "agent_run", "overdue_invoices", "marketplace_sync", "card_generation"] as const;
export type JobKind = (typeof JOB_KINDS)[number];

export interface KindSpec {
  /** The queues that may run this kind; the first is the default. */
  queues: readonly QueueName[];
  /** A budget declared for the task itself (wins over the queue's). */
  budget?: Budget;
  /** What one item is called, in messages people read. */
  noun: string;
  /** What to do when a job of this kind times out, said to the person reading the message. */
  advice: string;
  /**
   * For kinds that give their slot back while they wait (rescheduled), the longest a job may live
   * from its creation, waits included: the budget only counts time in a slot.
   */
  maxAge?: { ms: number; why: string };
}

export const KINDS: Record<JobKind, KindSpec> = {
  card_generation: {
    queues: ["generations"],
    noun: "card",
    advice: "The reserved image quota was returned; retry to generate the card again.",
  },
  marketplace_sync: {
    queues: ["marketplace-sync"],
    noun: "page",
    advice: "Retry it: it resumes at the page it reached.",
    maxAge: {
      ms: 6 * 3600_000,
      why: "statistics allow one request a minute, so a 300-page history needs 5 h of windows; data still arriving after 6 h is staler than what a fresh sync would fetch",
    },
  },
  csv_import: { queues: ["imports"], noun: "row", advice: "Split the file or retry the remaining rows." },
  bulk_ocr: { queues: ["documents"], noun: "document", advice: "Split the batch or retry the remaining documents." },
  agent_run: { queues: ["agent-batch", "agent-interactive"], noun: "step", advice: "Retry with a larger budget or give the agent a smaller task." },
  overdue_invoices: {
    queues: ["sweeps"],
    noun: "invoice",
    advice: "The next scheduled pass continues with the remaining invoices.",
    budget: {
      softMs: 5 * 60_000,
      hardMs: 8 * 60_000,
      why: "one pass over the open invoices at ~10 ms each covers ~30,000 in 5 min; a pass that needs longer must be batched, not given more time",
    },
  },
};

export const jobPayloadSchema = z.object({ jobId: z.uuid() }).strict();
export type JobPayload = z.infer<typeof jobPayloadSchema>;
