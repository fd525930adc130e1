import { db, type Prisma } from "@/lib/db/client";
import { AttemptFenced } from "@/lib/core/signals";

export type ItemOutcome =
  | { ok: true; effect: (tx: Prisma.TransactionClient) => Promise<unknown> }
  | { ok: false; row: number; reason: string };

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
 * Commits items together: their effects (or failure records), a `JobItem` row per item, and the
 * job's advance in one transaction, refused (`AttemptFenced`) unless `attempt` is still current
 * and the row running. Items finishing side by side are committed as a group because every
 * commit of a job takes its row's lock: one transaction for many items is what lets a job commit
 * hundreds of items a second. The `JobItem` row (unique per job and item) makes each effect
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
    for (const { outcome } of items) {
      if (outcome.ok) await outcome.effect(tx);
      else failures.push({ jobId, row: outcome.row, reason: outcome.reason.slice(0, 500), attempt });
    }
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
