import { z } from "zod";
import type { Budget } from "./budget";
import { worstCaseMs } from "./generation-policy";

/**
 * The job catalog: one declaration per queue and one per job kind. Everything else is derived
 * from it — the queues a worker consumes, the (queue, kind) pairs, the environment's budget
 * override variables (lib/env.ts), the budgets page, the reschedule policy's queues, the metrics'
 * label values, the demo traffic's coverage and the processor table (workers/catalog.ts, typed
 * `Record<JobKind, …>` so a kind without a processor does not compile). Adding a kind is one
 * entry in `KINDS` (plus its processor); adding a queue is one entry in `QUEUES`.
 *
 * Pure (no environment, no database): lib/env.ts, the pages and the worker thread can import it.
 */

/**
 * What a queue job carries: the row's id, which is all a run reads — the row is the record. The
 * other fields are for people and tools reading the queue (bull-board) and for the trace: never a
 * secret (the progress token is one). Optional, so queue jobs written before them still run.
 */
export const jobPayloadSchema = z
  .object({
    jobId: z.uuid(),
    kind: z.string().optional(),
    tenantId: z.uuid().optional(),
    /** Items at creation; the live counts are the queue job's progress. */
    total: z.number().int().nonnegative().nullable().optional(),
    /** The W3C trace context of the request that started the job (lib/tracing). */
    traceparent: z.string().max(256).optional(),
  })
  .strict();
export type JobPayload = z.infer<typeof jobPayloadSchema>;

/**
 * The policy a queue's jobs run under, besides the deadline every job has:
 * - `deadline`: its jobs call no rate-limited service: nothing to wait for;
 * - `reschedule`: a wait for a rate limit or a provider slot longer than the threshold gives the
 *   worker slot back (moved to *delayed* for the wait, no attempt spent), see lib/runs/reschedule.ts.
 *   Every queue whose kinds call a limited service (the marketplace, the model, OCR) has it.
 */
export type QueuePolicy = "deadline" | "reschedule";

export interface QueueSpec {
  /** A budget declared for every kind on this queue (a kind's own budget wins). */
  readonly budget?: Budget;
  readonly policy: QueuePolicy;
}

/** The outside service an item's calls go to (limits per provider: the items-in-flight work builds on it). */
export type Provider = "model" | "ocr" | "marketplace" | "images" | "none";

export interface KindSpec {
  /** The queues that may run this kind; the first is the default. */
  readonly queues: readonly QueueName[];
  /** The queue job's payload (the same for every kind today: the row id). */
  readonly payload: z.ZodType<JobPayload>;
  /** A budget declared for the task itself (wins over the queue's). */
  readonly budget?: Budget;
  /** What one item is called, in messages people read. */
  readonly noun: string;
  /** What to do when a job of this kind times out, said to the person reading the message. */
  readonly advice: string;
  /**
   * For kinds that give their slot back while they wait (rescheduled), the longest a job may live
   * from its creation, waits included: the budget only counts time in a slot.
   */
  readonly maxAge?: { readonly ms: number; readonly why: string };
  /** Items of one job in flight at once, and why that number. */
  readonly itemConcurrency: { readonly n: number; readonly why: string };
  /** The outside service each item calls. */
  readonly provider: Provider;
  /** Items that share one model call (a batched prompt), and why that many. Absent: one call per item. */
  readonly modelBatch?: { readonly size: number; readonly why: string };
  /**
   * Whether a job of this kind may send its items that still need the model to the provider's
   * Batch API (half price, hours of turnaround) when its budget leaves room (lib/runs/batch-lane.ts),
   * and why. Absent: never (a person is waiting, or the items depend on each other). An operator
   * turns it off per kind with `BOUNDED_BATCH_LANE_KINDS`.
   */
  readonly batchLane?: { readonly why: string };
  /**
   * How the demo traffic of `npm start` starts this kind: a relative weight among the demo's
   * pieces of work, or `null` with the reason it is not part of the random mix.
   */
  readonly demo: { readonly weight: number } | { readonly weight: null; readonly why: string };
}

const GENERATION_BUDGET_MS = Math.ceil((worstCaseMs() * 1.25) / 60_000) * 60_000;
const ONE_AT_A_TIME = {
  n: 1,
  why: "items run one after another: each item's commit advances the cursor by one",
} as const;

export const QUEUES = {
  imports: { policy: "reschedule" },
  documents: {
    policy: "reschedule",
    budget: {
      softMs: 30 * 60_000,
      hardMs: 40 * 60_000,
      why: "95 documents at the medians (OCR 2 s + one model pass 5.5 s) take ~12 min; 30 min leaves room for the tails (OCR p99 15 s, model p99 35 s)",
    },
  },
  "agent-batch": {
    policy: "reschedule",
    budget: {
      softMs: 30 * 60_000,
      hardMs: 40 * 60_000,
      why: "nobody is waiting: room for ~40 model calls at the p99 of 35 s plus tool calls, yet a runaway agent is stopped within the hour",
    },
  },
  "agent-interactive": {
    policy: "reschedule",
    budget: {
      softMs: 60_000,
      hardMs: 90_000,
      why: "a person is waiting on the screen: past a minute an answer is worth less than a clear 'this took too long'",
    },
  },
  sweeps: { policy: "deadline" },
  "marketplace-sync": {
    policy: "reschedule",
    budget: {
      softMs: 10 * 60_000,
      hardMs: 15 * 60_000,
      why: "counts time in a worker slot only (a wait over 5 s gives the slot back): 100 pages at ~1 s per request plus short waits under the 5 s threshold fit in 10 min",
    },
  },
  generations: {
    policy: "deadline",
    budget: {
      // Computed, not copied: the generation's own timeouts (lib/catalog/generation-policy.ts) end it first.
      softMs: GENERATION_BUDGET_MS,
      hardMs: GENERATION_BUDGET_MS + 5 * 60_000,
      why: "the worst case of one paid generation (every poll, download and QA attempt timing out, one regeneration: 960 s, lib/catalog/generation-policy.ts) plus a quarter, rounded up to the minute: the generation's own timeouts end it first, so the budget never cuts a generation that can still finish",
    },
  },
} as const satisfies Record<string, QueueSpec>;

export type QueueName = keyof typeof QUEUES;
export const QUEUE_NAMES = Object.keys(QUEUES) as QueueName[];

export const KINDS = {
  csv_import: {
    queues: ["imports"],
    payload: jobPayloadSchema,
    noun: "row",
    advice: "Split the file or retry the remaining rows.",
    itemConcurrency: {
      n: 512,
      why: "a row mostly waits on the model: the provider takes 32 calls at once (BOUNDED_PROVIDER_MODEL_CONCURRENCY) of 8 rows each, 256 rows; twice that keeps every slot busy while finished rows commit and new ones gather into batches (measured with 256: 18–25 of 32 calls in flight), so one import alone can use the whole provider and imports side by side share it through the provider limiter; rows that finish together commit together, so the database is not the limit",
    },
    modelBatch: {
      size: 8,
      why: "a call's fixed part (queueing, round trip, the category list, the first token) is paid once and each row adds a few output tokens (the simulator: × (1 + 0.1 × (rows − 1))): 8 rows take 1.7× one row's call, 0.21× per row, p99 ≈ 60 s; 4 would cost half as much again per row, and 16 only a quarter less while every row waits for an ≈ 88 s p99 and a bad answer or a deadline loses twice as many rows",
    },
    provider: "model",
    batchLane: {
      why: "rows are independent and nobody waits on the screen: a file imported overnight with a budget of hours can be categorised at the batch price, and whatever the batch has not answered by the last moment is finished directly",
    },
    demo: { weight: 5 },
  },
  category_reask: {
    queues: ["imports"],
    payload: jobPayloadSchema,
    noun: "row",
    advice: "Retry it: it resumes after the rows already asked again.",
    itemConcurrency: {
      n: 64,
      why: "rows of an import asked again on one provider an operator chose: eight calls of eight rows in flight, a share of the provider that leaves the imports running beside it theirs",
    },
    modelBatch: {
      size: 8,
      why: "the import's batch, so a row is asked again the way it was first asked (lib/catalog: csv_import)",
    },
    provider: "model",
    demo: {
      weight: null,
      why: "started by an operator from an import's page (or POST /api/jobs/<id>/retry with a route), never by random traffic",
    },
  },
  bulk_ocr: {
    queues: ["documents"],
    payload: jobPayloadSchema,
    noun: "document",
    advice: "Split the batch or retry the remaining documents.",
    itemConcurrency: ONE_AT_A_TIME,
    provider: "ocr",
    demo: { weight: 2 },
  },
  agent_run: {
    queues: ["agent-batch", "agent-interactive"],
    payload: jobPayloadSchema,
    noun: "step",
    advice: "Retry with a larger budget or give the agent a smaller task.",
    itemConcurrency: { n: 1, why: "an agent's next step depends on the answer to the last one" },
    provider: "model",
    demo: { weight: 2 },
  },
  overdue_invoices: {
    queues: ["sweeps"],
    payload: jobPayloadSchema,
    noun: "invoice",
    advice: "The next scheduled pass continues with the remaining invoices.",
    budget: {
      softMs: 5 * 60_000,
      hardMs: 8 * 60_000,
      why: "one pass over the open invoices at ~10 ms each covers ~30,000 in 5 min; a pass that needs longer must be batched, not given more time",
    },
    itemConcurrency: {
      n: 1,
      why: "each invoice is a short database write: the pass is bound by the database, not by waiting",
    },
    provider: "none",
    demo: {
      weight: null,
      why: "started once a day by the workers' own schedule (and on demand by an operator), never by random traffic",
    },
  },
  marketplace_sync: {
    queues: ["marketplace-sync"],
    payload: jobPayloadSchema,
    noun: "page",
    advice: "Retry it: it resumes at the page it reached.",
    maxAge: {
      ms: 6 * 3600_000,
      why: "statistics allow one request a minute, so a 300-page history needs 5 h of windows; data still arriving after 6 h is staler than what a fresh sync would fetch",
    },
    itemConcurrency: { n: 1, why: "the marketplace names the next page in its answer to the last one" },
    provider: "marketplace",
    demo: { weight: 4 },
  },
  card_generation: {
    queues: ["generations"],
    payload: jobPayloadSchema,
    noun: "card",
    advice: "The reserved image quota was returned; retry to generate the card again.",
    itemConcurrency: { n: 1, why: "one card per job: the reservation holds one unit of quota" },
    provider: "images",
    demo: { weight: 3 },
  },
} as const satisfies Record<string, KindSpec>;

export type JobKind = keyof typeof KINDS;
export const JOB_KINDS = Object.keys(KINDS) as [JobKind, ...JobKind[]];

/** The kind's declaration, or undefined for a kind the catalog does not know (a row from elsewhere). */
export function kindSpec(kind: string): KindSpec | undefined {
  return Object.hasOwn(KINDS, kind) ? KINDS[kind as JobKind] : undefined;
}

/** The kinds a queue runs, in catalog order. */
export function kindsOfQueue(queue: QueueName): JobKind[] {
  return JOB_KINDS.filter((kind) => (KINDS[kind].queues as readonly QueueName[]).includes(queue));
}

/** Every (queue, kind) pair the catalog can run, in queue order. */
export function catalogPairs(): { queue: QueueName; kind: JobKind }[] {
  return QUEUE_NAMES.flatMap((queue) => kindsOfQueue(queue).map((kind) => ({ queue, kind })));
}

/** The kinds the catalog lets use the batch lane (the environment may turn each off). */
export const BATCH_LANE_KINDS: readonly JobKind[] = JOB_KINDS.filter((kind) => {
  const spec: KindSpec = KINDS[kind];
  return spec.batchLane !== undefined;
});

/** The queues under the reschedule policy. */
export const RESCHEDULE_QUEUES: ReadonlySet<QueueName> = new Set(
  QUEUE_NAMES.filter((q) => QUEUES[q].policy === "reschedule"),
);

/** True for a queue whose jobs give their worker slot back while they wait for a rate-limit window. */
export function reschedules(queue: string): boolean {
  return RESCHEDULE_QUEUES.has(queue as QueueName);
}

/** The environment variable of a queue's budget override, in seconds. */
export type BudgetVariable = `BOUNDED_BUDGET_${string}_${"SOFT" | "HARD"}_S`;

/** `marketplace-sync` → `BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S`. */
export function budgetVariable(queue: string, limit: "SOFT" | "HARD"): BudgetVariable {
  return `BOUNDED_BUDGET_${queue.toUpperCase().replaceAll("-", "_")}_${limit}_S`;
}

/** Every budget override variable: two per queue of the catalog (lib/env.ts parses them). */
export const BUDGET_VARIABLES: readonly BudgetVariable[] = QUEUE_NAMES.flatMap((q) => [
  budgetVariable(q, "SOFT"),
  budgetVariable(q, "HARD"),
]);

/** The environment variable overriding a kind's items in flight. */
export type ItemsInFlightVariable = `BOUNDED_ITEMS_IN_FLIGHT_${string}`;

/** `csv_import` → `BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT`. */
export function itemsInFlightVariable(kind: string): ItemsInFlightVariable {
  return `BOUNDED_ITEMS_IN_FLIGHT_${kind.toUpperCase()}`;
}

/** One override variable per kind of the catalog (lib/env.ts parses them). */
export const ITEMS_IN_FLIGHT_VARIABLES: readonly ItemsInFlightVariable[] = JOB_KINDS.map(itemsInFlightVariable);

/** A kind's items in flight: the environment's override, else the catalog's number; 1 for a kind it does not know. */
export function itemsInFlight(kind: string, overrides: Partial<Record<ItemsInFlightVariable, number>>): number {
  return overrides[itemsInFlightVariable(kind)] ?? kindSpec(kind)?.itemConcurrency.n ?? 1;
}
