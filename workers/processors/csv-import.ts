import { runImport } from "@/lib/imports/run-import";
import type { Processor } from "@/lib/runs/processor";

/**
 * `csv_import`: the queue's adapter to the import (lib/imports/run-import.ts): read the stored
 * file, validate each row, ask the model for its category (once per question), write it.
 */
export const csvImport: Processor = (ctx) => runImport(ctx);
