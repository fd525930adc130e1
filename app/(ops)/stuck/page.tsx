import Link from "next/link";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { getStuckCounts, listOverdueDelayedJobs, listRecentlyReaped, listStuckJobs, reapGraceMs, reaperIntervalMs, type StuckReason } from "@/lib/jobs/stuck";
import { StatusBadge } from "../../components/status-badge";
import { fmtAgo, fmtInt, fmtOutOf, fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { DataTable, num } from "../../components/data-table";
import { JobCells, JobLink } from "../../components/job-link";
import { requirePageViewer } from "@/lib/auth/principal";

export const dynamic = "force-dynamic";
export const metadata = { title: "Stuck jobs" };

const REASON: Record<StuckReason, string> = {
  silent: "no heartbeat",
  over_budget: "past its soft budget",
  waiting_for_worker: "waiting for a worker",
};

export default async function StuckPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/stuck");
  const [stuck, reaped, { delayed, reapedLastDay }, overdue] = await Promise.all([listStuckJobs(), listRecentlyReaped(), getStuckCounts(), listOverdueDelayedJobs()]);
  const byKind = new Map<string, typeof stuck>();
  for (const s of stuck) byKind.set(s.kind, [...(byKind.get(s.kind) ?? []), s]);
  const scale = env().BOUNDED_TIME_SCALE;
  return (
    <main className="page">
      <PageHead
        title="Stuck jobs"
        description={
          <>
            Jobs that are not finished and are silent, past their soft budget, or still waiting for a worker. The reaper abandons a job that stays silent past its
            hard limit (it looks every {formatDuration(reaperIntervalMs())}, with a grace of {formatDuration(reapGraceMs())}, real time).
            {scale !== 1 ? ` Ages and budgets are in production units (time scale ${scale}).` : ""}
          </>
        }
      />

      <section className="grid cols-4" aria-label="Summary">
        <Stat label="Stuck now" value={fmtInt(stuck.length)} alert={stuck.length > 0} />
        <Stat label="Waiting for a rate-limit window (not stuck)" value={fmtInt(delayed)} href="/jobs?status=delayed" />
        <Stat label="Reaped in the last 24 h" value={fmtInt(reapedLastDay)} href="/jobs?status=abandoned" />
      </section>

      {stuck.length === 0 ? (
        <section className="panel" style={{ marginTop: "1.25rem" }}>
          <p className="message ok" style={{ margin: 0 }}>
            Nothing is stuck.
          </p>
        </section>
      ) : (
        [...byKind.entries()].map(([kind, jobs]) => (
          <section className="panel" key={kind} style={{ marginTop: "1.25rem" }}>
            <h2>
              <span className="mono">{kind}</span> <span className="muted small">({fmtInt(jobs.length)})</span>
            </h2>
            <DataTable headings={["Job", "Tenant", "Status", "Why", num("Age / soft budget"), "Last heartbeat", "Queue state", num("Done / total")]} rows={jobs}>
              {(j) => (
                <tr key={j.id}>
                  <td>
                    <JobLink id={j.id} />
                  </td>
                  <td>{j.tenant}</td>
                  <td>
                    <StatusBadge status={j.status} />
                  </td>
                  <td>{j.reasons.map((r) => REASON[r]).join(", ")}</td>
                  <td className="num">
                    {formatDurationRounded(j.ageMs)} / {formatDuration(j.budgetSoftMs)}{" "}
                    <strong style={{ color: j.budgetUsed > 1 ? "var(--bad)" : undefined }}>({Math.round(j.budgetUsed * 100)} %)</strong>
                  </td>
                  <td>{j.heartbeatAt ? fmtAgo(j.heartbeatAt) : "never"}</td>
                  <td className="mono">{j.queueState}</td>
                  <td className="num">{fmtOutOf(j.processed + j.failed, j.total)}</td>
                </tr>
              )}
            </DataTable>
          </section>
        ))
      )}

      {overdue.length > 0 ? (
        <section className="panel" style={{ marginTop: "1.25rem" }} aria-labelledby="overdue-title" data-testid="overdue-delayed">
          <h2 id="overdue-title">Delayed past their wake-up time</h2>
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

      <section className="panel" style={{ marginTop: "1.25rem" }}>
        <h2>Recently reaped</h2>
        <DataTable headings={["Job", "Kind", "Tenant", "When", "What happened"]} rows={reaped} empty="The reaper has not abandoned any job.">
          {(r) => (
            <tr key={r.id}>
              <JobCells job={r} />
              <td className="small">{fmtTime(r.finishedAt)}</td>
              <td>{r.message}</td>
            </tr>
          )}
        </DataTable>
      </section>
    </main>
  );
}
