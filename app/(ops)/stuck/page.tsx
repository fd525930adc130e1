import Link from "next/link";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { getStuckCounts, listOverdueDelayedJobs, listRecentlyReaped, listStuckJobs, reapGraceMs, reaperIntervalMs, type StuckReason } from "@/lib/jobs/stuck";
import { StatusBadge } from "../../components/status-badge";
import { fmtAgo, fmtInt, fmtTime } from "../../components/format";
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
      <div className="page-head">
        <div>
          <h1>Stuck jobs</h1>
          <p className="muted">
            Jobs that are not finished and are silent, past their soft budget, or still waiting for a worker. The reaper abandons a job that stays silent past its
            hard limit (it looks every {formatDuration(reaperIntervalMs())}, with a grace of {formatDuration(reapGraceMs())}, real time).
            {scale !== 1 ? ` Ages and budgets are in production units (time scale ${scale}).` : ""}
          </p>
        </div>
      </div>

      <section className="grid cols-4" aria-label="Summary">
        <div className={`stat ${stuck.length ? "alert" : ""}`}>
          <div className="label">Stuck now</div>
          <div className="value">{fmtInt(stuck.length)}</div>
        </div>
        <Link className="stat" href="/jobs?status=delayed">
          <div className="label">Waiting for a rate-limit window (not stuck)</div>
          <div className="value">{fmtInt(delayed)}</div>
        </Link>
        <Link className="stat" href="/jobs?status=abandoned">
          <div className="label">Reaped in the last 24 h</div>
          <div className="value">{fmtInt(reapedLastDay)}</div>
        </Link>
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
            <div className="table-wrap">
              <table className="data">
                <thead>
                  <tr>
                    <th>Job</th>
                    <th>Tenant</th>
                    <th>Status</th>
                    <th>Why</th>
                    <th className="num">Age / soft budget</th>
                    <th>Last heartbeat</th>
                    <th>Queue state</th>
                    <th className="num">Done / total</th>
                  </tr>
                </thead>
                <tbody>
                  {jobs.map((j) => (
                    <tr key={j.id}>
                      <td>
                        <Link className="mono" href={`/jobs/${j.id}`}>
                          {j.id.slice(0, 8)}
                        </Link>
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
                      <td className="num">
                        {fmtInt(j.processed + j.failed)} / {j.total === null ? "?" : fmtInt(j.total)}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
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
          <div className="table-wrap">
            <table className="data">
              <thead>
                <tr>
                  <th>Job</th>
                  <th>Kind</th>
                  <th>Tenant</th>
                  <th>Due back</th>
                  <th className="num">Overdue by</th>
                  <th>Queue state</th>
                </tr>
              </thead>
              <tbody>
                {overdue.map((d) => (
                  <tr key={d.id}>
                    <td>
                      <Link className="mono" href={`/jobs/${d.id}`}>
                        {d.id.slice(0, 8)}
                      </Link>
                    </td>
                    <td className="mono">{d.kind}</td>
                    <td>{d.tenant}</td>
                    <td className="small">{fmtTime(d.wakeUpAt)}</td>
                    <td className="num">{formatDurationRounded(d.overdueMs)}</td>
                    <td className="mono">{d.queueState}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      ) : null}

      <section className="panel" style={{ marginTop: "1.25rem" }}>
        <h2>Recently reaped</h2>
        {reaped.length === 0 ? (
          <div className="empty">The reaper has not abandoned any job.</div>
        ) : (
          <div className="table-wrap">
            <table className="data">
              <thead>
                <tr>
                  <th>Job</th>
                  <th>Kind</th>
                  <th>Tenant</th>
                  <th>When</th>
                  <th>What happened</th>
                </tr>
              </thead>
              <tbody>
                {reaped.map((r) => (
                  <tr key={r.id}>
                    <td>
                      <Link className="mono" href={`/jobs/${r.id}`}>
                        {r.id.slice(0, 8)}
                      </Link>
                    </td>
                    <td className="mono">{r.kind}</td>
                    <td>{r.tenant}</td>
                    <td className="small">{fmtTime(r.finishedAt)}</td>
                    <td>{r.message}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </main>
  );
}
