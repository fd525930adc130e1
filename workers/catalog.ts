import type { QueueName } from "@/lib/queues/catalog";
import { agentRun } from "./processors/agent-run";
import { bulkOcr } from "./processors/bulk-ocr";
import { cardGeneration } from "./processors/card-generation";
import { csvImport } from "./processors/csv-import";
import { marketplaceSync } from "./processors/marketplace-sync";
import { overdueInvoices } from "./processors/overdue-invoices";
import type { Processor } from "./runtime";

/** Job kind → processor. Queues, payloads and budgets of each kind: lib/queues/catalog.ts. */
export const PROCESSORS: Record<string, Processor> = {
  card_generation: cardGeneration,
  csv_import: csvImport,
  bulk_ocr: bulkOcr,
  agent_run: agentRun,
  overdue_invoices: overdueInvoices,
  marketplace_sync: marketplaceSync,
};

/** The queues this worker process consumes. */
export const WORKER_QUEUES: QueueName[] = ["imports", "documents", "agent-batch", "agent-interactive", "sweeps", "marketplace-sync", "generations"];
