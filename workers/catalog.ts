import type { QueueName } from "@/lib/queues/catalog";
import { agentRun } from "./processors/agent-run";
import { bulkOcr } from "./processors/bulk-ocr";
import { csvImport } from "./processors/csv-import";
import { overdueInvoices } from "./processors/overdue-invoices";
import type { Processor } from "./runtime";

/** Job kind → processor. Queues, payloads and budgets of each kind: lib/queues/catalog.ts. */
export const PROCESSORS: Record<string, Processor> = {
  csv_import: csvImport,
  bulk_ocr: bulkOcr,
  agent_run: agentRun,
  overdue_invoices: overdueInvoices,
};

/** The queues this worker process consumes. */
export const WORKER_QUEUES: QueueName[] = ["imports", "documents", "agent-batch", "agent-interactive", "sweeps"];
