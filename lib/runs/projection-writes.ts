import { db } from "@/lib/db/client";
import type { StoredProjection } from "@/lib/projection/projection";
import { logger } from "@/lib/log";

const log = logger("projection-writes");

/** Real ms a projection waits to be written with others: one statement for every start in that time. */
const FLUSH_AFTER_MS = 100;
/** Projections one statement writes at most. */
const FLUSH_EVERY = 500;

interface Pending {
  jobId: string;
  attempt: number;
  projection: StoredProjection;
}

let pending: Pending[] = [];
let timer: NodeJS.Timeout | undefined;
const writes = new Set<Promise<void>>();
/** Projections handed in and written since the process started (a bench checks that every start paid one). */
const counts = { kept: 0, written: 0 };

/**
 * Keeps a run's projection on its row (`params.projection`), where the customer's progress page
 * estimates from it until the job has measured itself — written with the other starts of the
 * next `FLUSH_AFTER_MS` in one statement, not one round trip per start. Only a row still running
 * the same attempt takes it: a job that finished first never needed it. Losing it in a crash is
 * harmless: the resumed run projects again.
 */
export function keepProjection(jobId: string, attempt: number, projection: StoredProjection): void {
  pending.push({ jobId, attempt, projection });
  counts.kept++;
  if (pending.length >= FLUSH_EVERY) write();
  else timer ??= setTimeout(write, FLUSH_AFTER_MS).unref();
}

/** Writes what is waiting and waits for every write started so far (shutdown, tests, benches). */
export async function flushProjections(): Promise<void> {
  write();
  await Promise.all([...writes]);
}

/** Projections kept and written so far by this process. */
export function projectionCounts(): { kept: number; written: number } {
  return { ...counts };
}

function write(): void {
  clearTimeout(timer);
  timer = undefined;
  if (pending.length === 0) return;
  const batch = pending;
  pending = [];
  const written: Promise<void> = db().$executeRaw`
      UPDATE "Job" j SET params = jsonb_set(coalesce(j.params, '{}'::jsonb), '{projection}', p.projection)
      FROM unnest(${batch.map((b) => b.jobId)}::uuid[], ${batch.map((b) => b.attempt)}::int[],
                  ${batch.map((b) => JSON.stringify(b.projection))}::jsonb[]) AS p(id, attempt, projection)
      WHERE j.id = p.id AND j.attempt = p.attempt AND j.status = 'running'`
    .then(
      (n) => {
        counts.written += n;
      },
      (err: unknown) => log.warn({ err, projections: batch.length }, "could not keep projections on their jobs"),
    )
    .finally(() => writes.delete(written));
  writes.add(written);
}
