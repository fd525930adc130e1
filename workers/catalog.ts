import { QUEUE_NAMES, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import { agentRun } from "./processors/agent-run";
import { bulkOcr } from "./processors/bulk-ocr";
import { cardGeneration } from "./processors/card-generation";
import { categoryReask } from "./processors/category-reask";
import { csvImport } from "./processors/csv-import";
import { marketplaceSync } from "./processors/marketplace-sync";
import { overdueInvoices } from "./processors/overdue-invoices";
import type { Processor } from "@/lib/runs/processor";

/**
 * Job kind → processor: the worker half of each kind's declaration in lib/catalog/catalog.ts
 * (lib never imports workers). Typed by the catalog's kinds, so a kind without a processor, or a
 * processor for a kind the catalog does not declare, does not compile.
 */
export const PROCESSORS: Record<JobKind, Processor> = {
  csv_import: csvImport,
  bulk_ocr: bulkOcr,
  agent_run: agentRun,
  overdue_invoices: overdueInvoices,
  marketplace_sync: marketplaceSync,
  card_generation: cardGeneration,
  category_reask: categoryReask,
};

/** Every queue of the catalog: what a worker process consumes unless `BOUNDED_WORKER_QUEUES` names fewer (workers/main.ts). */
export const WORKER_QUEUES: readonly QueueName[] = QUEUE_NAMES;
