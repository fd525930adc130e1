import { listAwaitingOperator } from "@/lib/diagnosis/awaiting-operator";
import {
  CAUSE_ACTION,
  CAUSE_ACTIONS,
  CAUSE_TITLE,
  classifyOpenJobs,
  fromAwaiting,
  STUCK_CAUSES,
  toJob,
  type StuckAction,
  type StuckCause,
  type StuckGroupJob,
} from "@/lib/diagnosis/stuck-causes";

/** Rows per page in each group. */
export const STUCK_PAGE_SIZE = 20;

export interface StuckGroup {
  cause: StuckCause;
  title: string;
  action: StuckAction;
  /** Every bulk action the group offers, the first being `action`. */
  actions: readonly StuckAction[];
  count: number;
  /** Ids of every job in the group, oldest first (what the bulk action takes), up to the cap. */
  ids: string[];
  page: number;
  pages: number;
  /** This page's jobs, newest first. */
  jobs: StuckGroupJob[];
}

export interface StuckOverview {
  groups: StuckGroup[];
  /** Jobs waiting in a paused queue: not late, counted apart. */
  waitingInPausedQueues: number;
  paused: { queue: string; by: string; since: string }[];
}

/**
 * The stuck page: every cause with its count and one page of its jobs, newest first. `pages`
 * says which page of each group to show (1 when absent).
 */
export async function getStuckOverview(
  pages: Partial<Record<StuckCause, number>> = {},
  now = new Date(),
): Promise<StuckOverview> {
  const [{ stuck, waitingInPausedQueues, paused }, awaiting] = await Promise.all([
    classifyOpenJobs(now),
    listAwaitingOperator(now),
  ]);
  const groups = STUCK_CAUSES.map((cause): StuckGroup => {
    // Oldest first: `stuck` follows the rows' creation, the awaiting list their end.
    const all =
      cause === "awaiting_operator" ? awaiting.map(fromAwaiting) : stuck.filter((c) => c.cause === cause).map(toJob);
    const newestFirst = [...all].reverse();
    const pageCount = Math.max(1, Math.ceil(all.length / STUCK_PAGE_SIZE));
    const page = Math.min(Math.max(1, pages[cause] ?? 1), pageCount);
    return {
      cause,
      title: CAUSE_TITLE[cause],
      action: CAUSE_ACTION[cause],
      actions: CAUSE_ACTIONS[cause],
      count: all.length,
      ids: all.map((j) => j.id),
      page,
      pages: pageCount,
      jobs: newestFirst.slice((page - 1) * STUCK_PAGE_SIZE, page * STUCK_PAGE_SIZE),
    };
  });
  return {
    groups,
    waitingInPausedQueues,
    paused: [...paused.entries()].map(([q, p]) => ({ queue: q, by: p.by, since: p.since.toISOString() })),
  };
}

/**
 * The stuck page's two headline numbers — open jobs stuck now, and ended jobs awaiting an operator
 * — read from its groups: the page's summary cards and the overview's say them from here, so the
 * overview cannot say "Nothing stuck" beside a job the page lists as awaiting a person.
 */
export interface StuckHeadline {
  stuckNow: number;
  awaitingOperator: number;
  /** The open causes with jobs in them, worst first: "2 lost from the queue · 1 heartbeat lost". */
  openCauses: string;
}

export function stuckHeadline(overview: StuckOverview): StuckHeadline {
  const open = overview.groups.filter((g) => g.cause !== "awaiting_operator");
  return {
    stuckNow: open.reduce((n, g) => n + g.count, 0),
    awaitingOperator: overview.groups.find((g) => g.cause === "awaiting_operator")?.count ?? 0,
    openCauses: open
      .filter((g) => g.count > 0)
      .map((g) => `${g.count.toLocaleString("en-US")} ${g.title.toLowerCase()}`)
      .join(" · "),
  };
}

/** Counts only, for the overview and the gauge: how many jobs each open cause holds now. */
export async function countStuckByCause(
  now = new Date(),
): Promise<Record<Exclude<StuckCause, "awaiting_operator">, number>> {
  const { stuck } = await classifyOpenJobs(now);
  const counts = { lost_from_queue: 0, over_hard_limit: 0, heartbeat_lost: 0, late_start: 0 };
  for (const c of stuck) counts[c.cause] += 1;
  return counts;
}
