import type { QueueName } from "@/lib/queues/catalog";
import { csvImport } from "./processors/csv-import";
import type { Processor } from "./runtime";

/** Job kind → processor. The queue of each kind and its payload schema live in lib/queues/catalog.ts. */
export const PROCESSORS: Record<string, Processor> = {
  csv_import: csvImport,
};

/** The queues this worker process consumes. */
export const WORKER_QUEUES: QueueName[] = ["imports"];
