import type { QueueName } from "@/lib/queues/catalog";
import { csvImport } from "./processors/csv-import";
import type { Processor } from "./runtime";

/** Job kind → processor. Queues, payloads and budgets of each kind: lib/queues/catalog.ts. */
export const PROCESSORS: Record<string, Processor> = {
  csv_import: csvImport,
};

/** The queues this worker process consumes. */
export const WORKER_QUEUES: QueueName[] = ["imports"];
