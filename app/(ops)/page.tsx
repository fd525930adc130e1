import Link from "next/link";
import { getBudgetReport } from "@/lib/budgets/report";
import { env } from "@/lib/env";
import { countJobsByStatus, listJobs } from "@/lib/jobs/queries";
import { listStuckJobs } from "@/lib/jobs/stuck";
import { JOB_STATUSES, STATUS_LABEL } from "@/lib/jobs/statuses";
import { getLatencyHistogram } from "@/lib/modelcalls/queries";
import { JobsTable } from "../components/jobs-table";
import { fmtInt } from "../components/format";
import { formatDurationRounded } from "@/lib/format/duration";
import { requirePageViewer } from "@/lib/auth/principal";

export const dynamic = "force-dynamic";
export const metadata = { title: "Overview" };

const ATTENTION = new Set(["timed_out", "killed", "failed", "abandoned"]);

/** The headline of each area; every number links to the page that explains it. */
export default async function OverviewPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/");
  const [counts, recent, stuck, calls, budgets] = await Promise.all([
    countJobsByStatus(),
    listJobs({ limit: 10 }),
    listStuckJobs(500),
    getLatencyHistogram({ range: "24h" }),
    getBudgetReport(),
  ]);
  const attention = JOB_STATUSES.filter((s) => ATTENTION.has(s)).reduce((n, s) => n + counts[s], 0);
  const drifting = budgets.rows.filter((r) => r.status === "drift").length;
  const atRisk = budgets.rows.filter((r) => r.risk.atRisk).length;
  const scale = env().BOUNDED_TIME_SCALE;
  const s = calls.summary;
  const failedCalls = s.byOutcome.error + s.byOutcome.aborted;
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>Overview</h1>
          <p className="muted">
            {stuck.length > 0 ? `${fmtInt(stuck.length)} stuck. ` : "Nothing stuck. "}
            {attention > 0 ? `${fmtInt(attention)} jobs ended badly in the last 24 h (timed out, stopped, failed or abandoned).` : "No job ended badly in the last 24 h."}
            {scale !== 1 ? ` Time scale ${scale}: latencies are as measured, budgets in production units.` : ""}
          </p>
        </div>
      </div>

      <section className="grid cols-4" aria-label="Headlines">
        <Link href="/stuck" className={`stat ${stuck.length ? "alert" : ""}`}>
          <div className="label">Stuck jobs</div>
          <div className="value">{fmtInt(stuck.length)}</div>
        </Link>
        <Link href="/model-calls" className="stat">
          <div className="label">Model calls, 24 h: p50 / p99</div>
          <div className="value">{s.p50 && s.p99 ? `${formatDurationRounded(s.p50.ms)} / ${formatDurationRounded(s.p99.ms)}` : "—"}</div>
          <div className="label">
            {fmtInt(s.total)} calls{failedCalls ? `, ${fmtInt(failedCalls)} failed or aborted` : ""}
          </div>
        </Link>
        <Link href="/budgets" className={`stat ${drifting || atRisk || budgets.workers.length === 0 ? "alert" : ""}`}>
          <div className="label">Budgets: drifting / at risk</div>
          <div className="value">
            {fmtInt(drifting)} / {fmtInt(atRisk)}
          </div>
          <div className="label">{budgets.workers.length === 0 ? "no worker is running" : `${fmtInt(budgets.workers.length)} live worker process${budgets.workers.length === 1 ? "" : "es"}`}</div>
        </Link>
        <Link href="/jobs?status=running" className="stat">
          <div className="label">Running / queued</div>
          <div className="value">
            {fmtInt(counts.running)} / {fmtInt(counts.queued)}
          </div>
        </Link>
      </section>

      <h2 style={{ marginTop: "1.5rem" }}>Jobs by status</h2>
      <p className="muted">Waiting and running now; finished in the last 24 hours. Each links to the full list.</p>
      <section className="grid cols-4" aria-label="Jobs by status">
        {JOB_STATUSES.map((st) => (
          <Link key={st} href={`/jobs?status=${st}`} className={`stat ${ATTENTION.has(st) && counts[st] > 0 ? "alert" : ""}`}>
            <div className="label">{STATUS_LABEL[st]}</div>
            <div className="value">{fmtInt(counts[st])}</div>
          </Link>
        ))}
      </section>
      <section className="panel" style={{ marginTop: "1.25rem" }}>
        <h2>Latest jobs</h2>
        <JobsTable jobs={recent.jobs} />
        <p className="small">
          <Link href="/jobs">All jobs →</Link>
        </p>
      </section>
    </main>
  );
}
