import { runReask } from "@/lib/reasks/run";
import type { Processor } from "@/lib/runs/processor";

/**
 * `category_reask`: the queue's adapter to the re-ask (lib/reasks/run.ts): an import's chosen rows
 * asked again on the provider an operator chose, each earlier answer kept beside the new one.
 */
export const categoryReask: Processor = (ctx) => runReask(ctx);
