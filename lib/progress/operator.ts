import { z } from "zod";
import { db } from "@/lib/db/client";
import { errorResponse } from "@/lib/http/api";
import type { JobStatus } from "@/lib/core/job-statuses";
import { ensureProgressListener } from "./listener";
import { getProgressSnapshot, type ProgressSnapshot, progressOf } from "./snapshot";
import { snapshotEvents } from "./stream";

/**
 * The operator's job page follows the same snapshot as the customer's progress page, by job id
 * and behind the operator's sign-in: the customer's link never reaches the browser. It is sent
 * only what the two pages share — status, counts, pace and time left — and the version, which tells
 * the page to redraw what the snapshot does not carry (timeline, attempts, model calls).
 */
export interface JobFacts {
  /** The snapshot's version: goes up with every change the job page should show. */
  version: number;
  /** When the snapshot was computed (ms since the epoch): newer than the page's render, it wins. */
  at: number;
  status: JobStatus;
  terminal: boolean;
  total: number | null;
  processed: number;
  failed: number;
  /** Items per real second, measured or projected; null while not known. */
  perSecond: number | null;
  /** Real seconds left; null while not known. */
  etaSeconds: number | null;
}

/** The job page's facts of a snapshot. */
export function jobFactsOf(snapshot: ProgressSnapshot): JobFacts {
  const p = progressOf(snapshot);
  return {
    version: snapshot.version,
    at: snapshot.computedAt,
    status: p.status,
    terminal: p.terminal,
    total: p.total,
    processed: p.processed,
    failed: p.failed,
    perSecond: p.rate?.perSecond ?? null,
    etaSeconds: p.etaSeconds,
  };
}

const jobId = z.uuid();
const NO_JOB = "No job with this id.";

/** The progress link of a job, or null for an id that names no job. */
async function tokenOf(id: string): Promise<string | null> {
  if (!jobId.safeParse(id).success) return null;
  const row = await db().job.findUnique({ where: { id }, select: { progressToken: true } });
  return row?.progressToken ?? null;
}

/**
 * `GET /api/jobs/:id/events` (operators; the route checks the role): server-sent events of the job's
 * facts, as the customer's stream (./stream.ts) — the current facts first, then each new version,
 * ending with the job — under the same per-address cap. An id that names no job is a 404.
 */
export async function jobEventsResponse(request: Request, id: string, address: string): Promise<Response> {
  void ensureProgressListener();
  const token = await tokenOf(id);
  const initial = token ? await getProgressSnapshot(token) : null;
  if (!token || !initial) return errorResponse(404, "not_found", NO_JOB);
  return snapshotEvents(request, token, address, initial, (snapshot) => JSON.stringify(jobFactsOf(snapshot)));
}

/** How long the job page waits for the stored facts before drawing without the pace and time left. */
const FACTS_WAIT_MS = 1_000;

/**
 * The job page's facts for a job's progress link, read as the stream would (the stored snapshot),
 * or null when Redis does not answer within a second: the page draws from its row without them.
 */
export async function readJobFacts(token: string): Promise<JobFacts | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), FACTS_WAIT_MS);
  });
  try {
    const snapshot = await Promise.race([getProgressSnapshot(token).catch(() => null), late]);
    return snapshot ? jobFactsOf(snapshot) : null;
  } finally {
    clearTimeout(timer);
  }
}
