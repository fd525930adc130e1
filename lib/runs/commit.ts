import { db, type Prisma } from "@/lib/db/client";
import { AttemptFenced } from "@/lib/core/signals";

/**
 * An item's write that goes together with the same writes of the other items of its commit: the
 * commit calls `write` once, with the `data` of every item that has the same `write` (the same
 * function), so a group of items costs one statement instead of one per item.
 * Make one with `groupedWrite`.
 */
export interface GroupedEffect<D = unknown> {
  data: D;
  write: (tx: Prisma.TransactionClient, data: D[]) => Promise<unknown>;
}

/** What an item writes in its commit: its own function, or its part of a write shared with the other items. */
export type Effect = ((tx: Prisma.TransactionClient) => Promise<unknown>) | GroupedEffect;

/**
 * `write`, as a maker of each item's part of it: `const rows = groupedWrite((tx, data) =>
 * tx.thing.createMany({ data }))`, then an item returns `rows(itsData)`.
 */
export function groupedWrite<D>(
  write: (tx: Prisma.TransactionClient, data: D[]) => Promise<unknown>,
): (data: D) => GroupedEffect {
  return (data) => ({ data, write }) as GroupedEffect;
}

export type ItemOutcome = { ok: true; effect: Effect } | { ok: false; row: number; reason: string };

/** One item to commit: its number (counted like the cursor: 1 is the job's first, or its range's) and what it did. */
export interface ItemCommit {
  item: number;
  outcome: ItemOutcome;
}

/**
 * Commits one item: its effect (or its failure record), the record that this item is done, and
 * the job's advance (processed or failed, cursor, heartbeat) in one transaction, refused unless
 * `attempt` is still current. See `commitItems`.
 */
export async function commitItem(
  jobId: string,
  attempt: number,
  item: number,
  outcome: ItemOutcome,
  parentId?: string | null,
  cursor = item,
): Promise<void> {
  await commitItems(jobId, attempt, [{ item, outcome }], parentId, cursor);
}

/**
 * Commits items together: their effects (a `GroupedEffect` once for all the items that share it)
 * or failure records, a `JobItem` row per item, and the job's advance in one transaction, refused
 * (`AttemptFenced`) unless `attempt` is still current and the row running. Items finishing side
 * by side are committed as a group because every commit of a job takes its row's lock: one
 * transaction for many items is what lets a job commit hundreds of items a second. The `JobItem` row (unique per job and item) makes each effect
 * exactly-once: a second commit of an item fails as a whole and writes nothing. `cursor` is the
 * contiguous low watermark these commits complete (it never moves back). A part of a split job
 * advances the counts of the job it was split from in the same transaction, so the original job
 * (and its customer's progress page) shows the parts' aggregate.
 */
export async function commitItems(
  jobId: string,
  attempt: number,
  items: readonly ItemCommit[],
  parentId: string | null | undefined,
  cursor: number,
): Promise<void> {
  if (items.length === 0) return;
  const ok = items.filter((i) => i.outcome.ok).length;
  const bad = items.length - ok;
  await db().$transaction(async (tx) => {
    const advanced = await tx.$executeRaw`
      UPDATE "Job" SET processed = processed + ${ok}::int, failed = failed + ${bad}::int,
             cursor = greatest(cursor, ${cursor}::int), "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
      WHERE id = ${jobId}::uuid AND attempt = ${attempt}::int AND status = 'running'`;
    if (advanced === 0) throw new AttemptFenced(jobId, attempt);
    await tx.$executeRaw`
      INSERT INTO "JobItem" ("jobId", item, attempt, ok)
      SELECT ${jobId}::uuid, item, ${attempt}::int, ok FROM unnest(${items.map((i) => i.item)}::int[], ${items.map((i) => i.outcome.ok)}::boolean[]) AS t(item, ok)`;
    if (parentId) {
      await tx.$executeRaw`
        UPDATE "Job" SET processed = processed + ${ok}::int, failed = failed + ${bad}::int,
               "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
        WHERE id = ${parentId}::uuid`;
    }
    const failures: { jobId: string; row: number; reason: string; attempt: number }[] = [];
    const grouped = new Map<GroupedEffect["write"], unknown[]>();
    for (const { outcome } of items) {
      if (!outcome.ok) failures.push({ jobId, row: outcome.row, reason: outcome.reason.slice(0, 500), attempt });
      else if (typeof outcome.effect === "function") await outcome.effect(tx);
      else {
        const { write, data } = outcome.effect;
        const all = grouped.get(write);
        if (all) all.push(data);
        else grouped.set(write, [data]);
      }
    }
    for (const [write, data] of grouped) await write(tx, data);
    if (failures.length > 0) await tx.jobItemFailure.createMany({ data: failures });
  });
}

/**
 * The items of a job committed after `from` (and up to `to`): above its cursor, by earlier runs
 * that stopped with items in flight, so a resume skips them; or, for a part of a split job, the
 * items of its range the job it was split from had already committed.
 */
export async function committedItems(jobId: string, from: number, to = 2 ** 31 - 1): Promise<number[]> {
  const rows = await db().$queryRaw<{ item: number }[]>`
    SELECT item FROM "JobItem" WHERE "jobId" = ${jobId}::uuid AND item > ${from}::int AND item <= ${to}::int`;
  return rows.map((r) => r.item);
}
