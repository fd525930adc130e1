import { db } from "@/lib/db/client";
import type { CallOutcome } from "@/lib/core/call-outcomes";
import { partOf } from "@/lib/jobs/parts";

/**
 * A job's forensics: what happened to it, on one timeline — its events (created, each attempt
 * started, retried, handed over, rescheduled for a rate-limit window, resumed after its worker
 * died, queued again, finished) and the
 * calls it made (model, OCR and tool calls with latency, outcome and batch size) — with a
 * summary of its calls above it. A split job's timeline takes in its parts' events and calls.
 */

/** Calls shown one by one; a job with more shows its latest ones and counts the earlier ones in one line. */
export const TIMELINE_CALLS = 200;
/** Events shown (a job has a handful; a split one a handful per part). */
export const TIMELINE_EVENTS = 500;

/** What an event is, for the reader: an attempt beginning, a rate-limit reschedule, the reaper's doing, or the rest. */
export type EventCategory = "attempt" | "reschedule" | "reaper" | "event";

const CATEGORY_OF: Record<string, EventCategory> = {
  started: "attempt",
  retry: "attempt",
  // The platform's own retry of a job an outside service ended (lib/diagnosis/resume-policy.ts).
  auto_resumed: "attempt",
  handed_over: "attempt",
  delayed: "reschedule",
  // The reaper used to finalize a row `abandoned`; it now resumes it. A resume after a stopped
  // run (`crash_resumed`, lib/runs/crash-resume.ts) and a row queued again (`requeued`) are plain
  // events, shown by their type: neither ends the job.
  abandoned: "reaper",
};

export function eventCategory(type: string): EventCategory {
  return CATEGORY_OF[type] ?? "event";
}

export interface TimelineEvent {
  kind: "event";
  at: string;
  category: EventCategory;
  type: string;
  attempt: number;
  message: string;
  /** The part it belongs to when the job was split (null: the job itself). */
  part: number | null;
}

export interface TimelineCall {
  kind: "call";
  at: string;
  id: string;
  type: string;
  model: string;
  durationMs: number;
  outcome: CallOutcome;
  error: string | null;
  batchSize: number;
  part: number | null;
}

/** The calls not shown one by one (all before the first one shown), counted. */
export interface TimelineEarlierCalls {
  kind: "earlier_calls";
  /** When the first of them started. */
  at: string;
  /** When the first call shown started: these all started before it. */
  until: string;
  calls: number;
  errors: number;
}

export type TimelineEntry = TimelineEvent | TimelineCall | TimelineEarlierCalls;

/** One call type's figures over all of a job's calls (not only those shown). */
export interface CallStats {
  type: string;
  calls: number;
  errors: number;
  aborted: number;
  /** Hedged requests cancelled because their twin answered first: no failure. */
  superseded: number;
  /** Exact: the median of the recorded durations. */
  p50Ms: number;
  maxMs: number;
  /** Items the answered calls answered (a batched call answers several; a failed or cancelled one none). */
  items: number;
}

export interface JobForensics {
  jobId: string;
  /** Per call type, model calls first. */
  calls: CallStats[];
  callsTotal: number;
  callsShown: number;
  reschedules: number;
  /** Runs started (the first one and every resumption). */
  attempts: number;
  reaped: number;
  /** Oldest first. */
  entries: TimelineEntry[];
  eventsTruncated: boolean;
}

const TYPE_ORDER = ["model", "ocr", "tool"];

interface StatsRow {
  type: string;
  calls: number;
  errors: number;
  aborted: number;
  superseded: number;
  p50: number;
  max: number;
  items: number;
  first: Date;
}

/**
 * The merged timeline of a job, oldest first, bounded: every event (up to `TIMELINE_EVENTS`),
 * the latest `callsLimit` calls one by one, and the earlier calls as one counted line. The
 * summary counts every call. Null for an unknown job.
 */
export async function getJobForensics(jobId: string, callsLimit = TIMELINE_CALLS): Promise<JobForensics | null> {
  const scope = await readJobScope(jobId);
  if (!scope) return null;
  const { stats, calls, events } = await readTimelineRows(scope.ids, callsLimit);
  const callsTotal = stats.reduce((n, s) => n + s.calls, 0);
  const entries = mergeTimeline([
    ...eventEntries(events, scope.partOfRow),
    ...callEntries(calls, scope.partOfRow),
    ...earlierCallsEntry(stats, calls, callsTotal),
  ]);
  const { reschedules, attempts, reaped } = await countEvents(scope.ids, events);

  return {
    jobId,
    calls: callStats(stats),
    callsTotal,
    callsShown: calls.length,
    reschedules,
    attempts,
    reaped,
    entries,
    eventsTruncated: events.length > TIMELINE_EVENTS,
  };
}

/** The rows a job's timeline reads: the job's and its parts' ids, and the part a row's job is. */
interface JobScope {
  ids: string[];
  /** The part a row of `id` belongs to (null: the job itself). */
  partOfRow: (id: string | null) => number | null;
}

/** The job and its parts, to read their rows together; null for an unknown job. */
async function readJobScope(jobId: string): Promise<JobScope | null> {
  const job = await db().job.findUnique({ where: { id: jobId }, select: { id: true } });
  if (!job) return null;
  const parts = await db().job.findMany({ where: { parentId: jobId }, select: { id: true, params: true } });
  const partIndex = new Map(parts.map((p) => [p.id, partOf(p.params)?.index ?? null]));
  const ids = [jobId, ...parts.map((p) => p.id)];
  const partOfRow = (id: string | null) => (id && id !== jobId ? (partIndex.get(id) ?? null) : null);
  return { ids, partOfRow };
}

/** Every call summed up per type, the latest `callsLimit` calls and the first events (one more than shown). */
async function readTimelineRows(ids: string[], callsLimit: number) {
  const [stats, calls, events] = await Promise.all([
    // Every call of the job, aggregated in the database from the jobId index: a job with 12,000
    // calls sends one row per call type.
    db().$queryRaw<StatsRow[]>`
      SELECT type::text AS type, count(*)::int AS calls,
             (count(*) FILTER (WHERE outcome = 'error'))::int AS errors,
             (count(*) FILTER (WHERE outcome = 'aborted'))::int AS aborted,
             (count(*) FILTER (WHERE outcome = 'superseded'))::int AS superseded,
             percentile_disc(0.5) WITHIN GROUP (ORDER BY "durationMs") AS p50,
             max("durationMs") AS max, coalesce(sum("batchSize") FILTER (WHERE outcome = 'ok'), 0)::int AS items, min("startedAt") AS first
      FROM "ModelCall" WHERE "jobId" = ANY(${ids}::uuid[]) AND type::text <> 'item'
      GROUP BY type`,
    db().modelCall.findMany({
      where: { jobId: { in: ids }, type: { not: "item" } },
      orderBy: [{ startedAt: "desc" }, { id: "desc" }],
      take: callsLimit,
      select: {
        id: true,
        jobId: true,
        startedAt: true,
        type: true,
        model: true,
        durationMs: true,
        outcome: true,
        error: true,
        batchSize: true,
      },
    }),
    db().jobEvent.findMany({
      where: { jobId: { in: ids } },
      orderBy: [{ at: "asc" }, { id: "asc" }],
      take: TIMELINE_EVENTS + 1,
      select: { jobId: true, at: true, type: true, attempt: true, message: true },
    }),
  ]);
  return { stats, calls, events };
}

type TimelineRows = Awaited<ReturnType<typeof readTimelineRows>>;
type CallRow = TimelineRows["calls"][number];
type EventRow = TimelineRows["events"][number];
/** A timeline entry with its place among those at the same moment. */
type OrderedEntry = TimelineEntry & { order: number };

/** The events shown (the first `TIMELINE_EVENTS`), as timeline entries before any call. */
function eventEntries(events: EventRow[], partOfRow: JobScope["partOfRow"]): OrderedEntry[] {
  return events.slice(0, TIMELINE_EVENTS).map((e, i) => ({
    kind: "event",
    at: e.at.toISOString(),
    category: eventCategory(e.type),
    type: e.type,
    attempt: e.attempt,
    message: e.message,
    part: partOfRow(e.jobId),
    order: i,
  }));
}

/** The calls shown (newest first as read), as timeline entries in the order they were made. */
function callEntries(calls: CallRow[], partOfRow: JobScope["partOfRow"]): OrderedEntry[] {
  return calls.map((c, i) => ({
    kind: "call",
    at: c.startedAt.toISOString(),
    id: c.id.toString(),
    type: c.type,
    model: c.model,
    durationMs: c.durationMs,
    outcome: c.outcome,
    error: c.error,
    batchSize: c.batchSize,
    part: partOfRow(c.jobId),
    order: TIMELINE_EVENTS + 1 + (calls.length - i),
  }));
}

/** The one line counting the calls not shown, all before the first one shown; none when every call is shown. */
function earlierCallsEntry(stats: StatsRow[], calls: CallRow[], callsTotal: number): OrderedEntry[] {
  const earlier = callsTotal - calls.length;
  if (earlier <= 0) return [];
  const first = stats.reduce<Date | null>((d, s) => (d === null || s.first < d ? s.first : d), null)!;
  const errorsShown = calls.filter((c) => c.outcome === "error").length;
  const errors = stats.reduce((n, s) => n + s.errors, 0) - errorsShown;
  const oldestShown = calls.at(-1)!.startedAt.toISOString();
  return [
    {
      kind: "earlier_calls",
      at: first.toISOString(),
      until: oldestShown,
      calls: earlier,
      errors,
      order: TIMELINE_EVENTS,
    },
  ];
}

/** The entries in timeline order, without their order keys. */
function mergeTimeline(entries: OrderedEntry[]): TimelineEntry[] {
  // By time; at the same moment, events before calls (a run starts, then calls), calls in the order made.
  entries.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.order - b.order));
  return entries.map(({ order: _order, ...e }) => e as TimelineEntry);
}

/** The job's reschedules, attempts started and reaper's ends, over every event, not only those shown. */
async function countEvents(ids: string[], events: EventRow[]) {
  const truncated = events.length > TIMELINE_EVENTS;
  const eventTypes = events.slice(0, TIMELINE_EVENTS).map((e) => e.type);
  const count = (type: string) =>
    truncated
      ? db().jobEvent.count({ where: { jobId: { in: ids }, type } })
      : eventTypes.filter((t) => t === type).length;
  const [reschedules, attempts, reaped] = await Promise.all([count("delayed"), count("started"), count("abandoned")]);
  return { reschedules, attempts, reaped };
}

/** The per-type summary of every call, model calls first. */
function callStats(stats: StatsRow[]): CallStats[] {
  return stats
    .map((s) => ({
      type: s.type,
      calls: s.calls,
      errors: s.errors,
      aborted: s.aborted,
      superseded: s.superseded,
      p50Ms: Number(s.p50),
      maxMs: Number(s.max),
      items: s.items,
    }))
    .sort((a, b) => TYPE_ORDER.indexOf(a.type) - TYPE_ORDER.indexOf(b.type));
}
