import Link from "next/link";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { getStuckCounts, listOverdueDelayedJobs, reapGraceMs, reaperIntervalMs } from "@/lib/jobs/stuck";
import { getStuckOverview, STUCK_CAUSES, type StuckCause, type StuckGroup, type StuckGroupJob } from "@/lib/jobs/stuck-groups";
import { STUCK_ACTION_CAP } from "@/lib/jobs/mark-failed";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { StatusBadge } from "../../components/status-badge";
import { fmtAgo, fmtInt, fmtOutOf, fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { DataTable, num } from "../../components/data-table";
import { JobCells, JobLink } from "../../components/job-link";
import { GroupAction } from "./group-action";

export const dynamic = "force-dynamic";
export const metadata = { title: "Stuck jobs" };

/** What each group means and what its action does, said once above its table. */
const EXPLAIN: Record<StuckCause, string> = {
  lost_from_queue: "The row says it is open but the queue no longer holds it: nothing would run it. The reaper queues these again on its next pass, to resume from where they stopped; mark them failed to end them instead.",
  over_hard_limit: "Running longer than the hard limit: the runtime should have stopped them. Mark them failed to end them (they can be retried from their cursor).",
  heartbeat_lost: "Running, but three heartbeats missed: the worker is probably gone. Past their hard limit the reaper resumes them on another worker (at most 3 times, then ends them as failed); mark them failed to end them now.",
  late_start:
    "Waiting far longer than their queue's pace explains (over 3× the expected wait given the jobs ahead of them, and over their soft budget). Jobs in a paused queue are never late.",
  reaped: "Ended by the reaper (abandoned) in the last 24 h and not retried since. Retry resumes each from where it stopped.",
};

function pageHref(pages: Partial<Record<StuckCause, number>>, cause: StuckCause, page: number): string {
  const next = new URLSearchParams();
  for (const c of STUCK_CAUSES) {
    const p = c === cause ? page : pages[c];
    if (p && p > 1) next.set(c, String(p));
  }
  const q = next.toString();
  return `/stuck${q ? `?${q}` : ""}#${cause}`;
}

function ageCell(cause: StuckCause, j: StuckGroupJob) {
  if (cause === "late_start") return `waited ${formatDurationRounded(j.ageMs)}${j.expectedMs !== null ? ` / expected ${formatDurationRounded(j.expectedMs)}` : ""}`;
  if (cause === "over_hard_limit") return `ran ${formatDurationRounded(j.ageMs)} / hard ${formatDuration(j.budgetHardMs)}`;
  if (cause === "heartbeat_lost") return `silent ${formatDurationRounded(j.ageMs)}`;
  // Real time, as the "Ended" column beside it.
  if (cause === "reaped") return j.finishedAt ? fmtAgo(j.finishedAt) : "—";
  return `open ${formatDurationRounded(j.ageMs)}`;
}

function GroupSection({ group, pages, canAct }: { group: StuckGroup; pages: Partial<Record<StuckCause, number>>; canAct: boolean }) {
  const { cause } = group;
  return (
    // An empty group stays on the page as one slim line: the result of the action that emptied it stays readable.
    <section className="panel" id={cause} aria-labelledby={`${cause}-title`} data-testid={`group-${cause}`} style={group.count === 0 ? { padding: "0.6rem 1.25rem", marginBottom: "0.6rem" } : undefined}>
      <div className="page-head" style={{ marginBottom: group.count === 0 ? 0 : "0.5rem" }}>
        <h2 id={`${cause}-title`} style={{ margin: 0, fontSize: group.count === 0 ? "1rem" : undefined, fontWeight: group.count === 0 ? 500 : undefined }}>
          {group.title} <span data-testid={`count-${cause}`}>({fmtInt(group.count)})</span>
          {group.count === 0 ? <span className="muted"> — none</span> : null}
        </h2>
        <GroupAction
          cause={cause}
          title={group.title}
          intent={group.action}
          ids={group.ids}
          cap={STUCK_ACTION_CAP}
          canAct={canAct}
          disabledReason={canAct ? null : "Only operators can act on stuck jobs; you are signed in as a viewer."}
        />
      </div>
      {group.count === 0 ? null : (
        <>
          <p className="muted small">{EXPLAIN[cause]}</p>
          <DataTable
            headings={["Job", "Kind · tenant", "Status", "Why", num("How long"), cause === "reaped" ? "Ended" : "Last heartbeat", "Queue", num("Done / total")]}
            rows={group.jobs}
            label={`${group.title}, newest first`}
            // Scrolls sideways on a phone rather than squeezing the reason into a sliver.
            style={{ minWidth: "56rem" }}
          >
            {(j) => (
              <tr key={j.id} data-job={j.id}>
                <td>
                  <JobLink id={j.id} />
                </td>
                <td>
                  <span className="mono">{j.kind}</span> · {j.tenant}
                </td>
                <td>
                  <StatusBadge status={j.status} />
                </td>
                <td>{j.why}</td>
                <td className="num">{ageCell(cause, j)}</td>
                <td className="small">{cause === "reaped" ? fmtTime(j.finishedAt) : j.heartbeatAt ? fmtAgo(j.heartbeatAt) : "never"}</td>
                <td className="mono">{cause === "reaped" ? j.queue : `${j.queue}: ${j.queueState}`}</td>
                <td className="num">{fmtOutOf(j.processed + j.failed, j.total)}</td>
              </tr>
            )}
          </DataTable>
        </>
      )}
      {group.pages > 1 ? (
        <nav className="pager" aria-label={`${group.title}: pages`} style={{ gap: "0.6rem", alignItems: "center" }}>
          {group.page > 1 ? (
            <Link className="button secondary" href={pageHref(pages, cause, group.page - 1)}>
              ← Newer
            </Link>
          ) : null}
          <span className="muted small">
            Page {fmtInt(group.page)} of {fmtInt(group.pages)}
          </span>
          {group.page < group.pages ? (
            <Link className="button secondary" href={pageHref(pages, cause, group.page + 1)}>
              Older →
            </Link>
          ) : null}
        </nav>
      ) : null}
    </section>
  );
}

export default async function StuckPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/stuck");
  const raw = await searchParams;
  const pages: Partial<Record<StuckCause, number>> = {};
  for (const c of STUCK_CAUSES) {
    const v = Number(raw[c]);
    if (Number.isInteger(v) && v > 1) pages[c] = Math.min(v, 10_000);
  }
  const [overview, { delayed }, overdue] = await Promise.all([getStuckOverview(pages), getStuckCounts(), listOverdueDelayedJobs()]);
  const canAct = hasRole(principal, "operator");
  const open = overview.groups.filter((g) => g.cause !== "reaped");
  const stuckNow = open.reduce((n, g) => n + g.count, 0);
  // Worst first: the causes' order is their severity; empty groups follow, one line each (kept,
  // not hidden, so the result of the action that emptied one stays on the screen).
  const shown = [...overview.groups.filter((g) => g.count > 0), ...overview.groups.filter((g) => g.count === 0)];
  const scale = env().BOUNDED_TIME_SCALE;
  const { reaper } = overview;
  return (
    <main className="page">
      <PageHead
        title="Stuck jobs"
        description={
          <>
            Open jobs grouped by why they are stuck, worst first, and the jobs the reaper ended. The reaper resumes a job silent past its hard limit and reconciles
            rows with the queue (it looks every {formatDuration(reaperIntervalMs())}, with a grace of {formatDuration(reapGraceMs())}, real time).
            {scale !== 1 ? ` Ages and budgets are in production units (time scale ${scale}).` : ""}
          </>
        }
      />

      <section className="grid cols-4" aria-label="Summary">
        <Stat label="Stuck now (open jobs)" value={fmtInt(stuckNow)} alert={stuckNow > 0} testId="stuck-now">
          <div className="label">
            {stuckNow > 0
              ? open
                  .filter((g) => g.count > 0)
                  .map((g) => `${fmtInt(g.count)} ${g.title.toLowerCase()}`)
                  .join(" · ")
              : "none lost, late, silent or over the limit"}
          </div>
        </Stat>
        <Stat label="Finalised by the reaper, last 24 h" value={fmtInt(reaper.finalised)} href="#reaped" testId="reaper-finalised">
          <div className="label">{fmtInt(reaper.stillAbandoned)} still abandoned (retry below)</div>
        </Stat>
        <Stat label="Waiting in paused queues (not late)" value={fmtInt(overview.waitingInPausedQueues)} href="/queues">
          <div className="label">
            {overview.paused.length ? overview.paused.map((p) => `${p.queue} paused by ${p.by} since ${fmtTime(p.since)}`).join("; ") : "no queue is paused"}
          </div>
        </Stat>
        <Stat label="Waiting for a rate-limit window (not stuck)" value={fmtInt(delayed)} href="/jobs?status=delayed" />
      </section>

      {stuckNow === 0 ? (
        <p className="message ok" style={{ marginBottom: "1.25rem" }}>
          Nothing is stuck: no open job is lost, past its hard limit, silent, or waiting far past its expected start.
        </p>
      ) : null}

      <div style={{ marginTop: "1.25rem" }}>
        {shown.map((g) => (
          <GroupSection key={g.cause} group={g} pages={pages} canAct={canAct} />
        ))}
      </div>

      {overdue.length > 0 ? (
        <section className="panel" style={{ marginTop: "1.25rem" }} aria-labelledby="overdue-title" data-testid="overdue-delayed">
          <h2 id="overdue-title">Delayed past their wake-up time ({fmtInt(overdue.length)})</h2>
          <p className="muted small">
            Waiting for a rate-limit window is not stuck, and these are never reaped; but they should have gone back to a worker by now (see{" "}
            <Link href="/limiter">the limiter</Link>).
          </p>
          <DataTable headings={["Job", "Kind", "Tenant", "Due back", num("Overdue by"), "Queue state"]} rows={overdue}>
            {(d) => (
              <tr key={d.id}>
                <JobCells job={d} />
                <td className="small">{fmtTime(d.wakeUpAt)}</td>
                <td className="num">{formatDurationRounded(d.overdueMs)}</td>
                <td className="mono">{d.queueState}</td>
              </tr>
            )}
          </DataTable>
        </section>
      ) : null}
    </main>
  );
}
