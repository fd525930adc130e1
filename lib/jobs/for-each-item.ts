import type { Prisma } from "@/lib/db/client";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { isControlSignal, ItemError } from "./errors";
import { commitItem } from "./run";

/** What one item did: a database effect committed with the job's advance, or nothing to write. */
export type ItemEffect = ((tx: Prisma.TransactionClient) => Promise<unknown>) | null;

export interface ItemLoop {
  jobId: string;
  /** The job kind, for the per-kind failure counter. */
  kind?: string;
  attempt: number;
  /** Items already done by earlier attempts: those are skipped, not redone. */
  cursor: number;
  /**
   * For a part of a split job: the positions of the source batch this run covers (`from + 1 …
   * to`); the cursor then counts from `from`.
   */
  range?: { from: number; to: number };
  /** For a part of a split job: the job it was split from, whose counts follow the part's. */
  parentId?: string | null;
  signal: AbortSignal;
  log: Logger;
}

export interface ItemInfo {
  /** 1-based position of the item in the (source) batch. */
  index: number;
  /** The number a person sees for this item (a spreadsheet row, a file number). */
  row: number;
  signal: AbortSignal;
}

export interface PassSummary {
  processed: number;
  failed: number;
}

/** What the person reads next to the item. An unexpected error's text stays in the log: it may name internals. */
function reasonOf(err: unknown): string {
  return err instanceof ItemError ? err.message : "could not be processed because of an internal error (logged for the operators)";
}

/**
 * Runs `handle` for every item after the cursor (within its range, for a part of a split job),
 * committing each item's effect (or its failure) together with the job's advance. An item's error is that item's failure and the loop goes on;
 * a control signal (the deadline above all) ends the loop and is never an item failure. The
 * signal is checked before every item and before every commit, so a handler that swallowed the
 * deadline cannot keep the loop going. Logs one summary line per pass.
 */
export async function forEachItem<T>(
  loop: ItemLoop,
  items: AsyncIterable<T> | Iterable<T>,
  handle: (item: T, info: ItemInfo) => Promise<ItemEffect>,
  rowOf: (index: number) => number = (index) => index,
): Promise<PassSummary> {
  const summary: PassSummary = { processed: 0, failed: 0 };
  const { signal } = loop;
  const from = loop.range?.from ?? 0;
  const to = loop.range?.to ?? Infinity;
  let index = 0;
  try {
    for await (const item of items) {
      index += 1;
      if (index <= from + loop.cursor) continue;
      if (index > to) break;
      signal.throwIfAborted();
      const row = rowOf(index);
      let outcome: { ok: true; effect: ItemEffect } | { ok: false; reason: string };
      try {
        outcome = { ok: true, effect: await handle(item, { index, row, signal }) };
      } catch (err) {
        // A deadline that arrives as any error (wrapped, re-thrown, swallowed into another) is still the deadline.
        if (signal.aborted) throw signal.reason;
        if (isControlSignal(err)) throw err;
        if (!(err instanceof ItemError)) loop.log.error({ err, row }, "unexpected error in an item");
        outcome = { ok: false, reason: reasonOf(err) };
      }
      signal.throwIfAborted();
      if (outcome.ok) {
        const effect = outcome.effect;
        await commitItem(loop.jobId, loop.attempt, index - from, { ok: true, effect: effect ?? (async () => undefined) }, loop.parentId);
        summary.processed += 1;
      } else {
        await commitItem(loop.jobId, loop.attempt, index - from, { ok: false, row, reason: outcome.reason }, loop.parentId);
        summary.failed += 1;
        if (loop.kind) metrics.jobItemsFailed.inc({ kind: loop.kind });
      }
    }
  } finally {
    const line = `processed=${summary.processed} failed=${summary.failed}`;
    if (summary.failed > 0) loop.log.warn(summary, line);
    else loop.log.info(summary, line);
  }
  return summary;
}
