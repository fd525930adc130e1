import Link from "next/link";
import { countJobsByStatus, listJobs } from "@/lib/jobs/queries";
import { JOB_STATUSES, STATUS_LABEL } from "@/lib/jobs/statuses";
import { JobsTable } from "../components/jobs-table";
import { fmtInt } from "../components/format";

export const dynamic = "force-dynamic";
export const metadata = { title: "Overview" };

const ATTENTION = new Set(["timed_out", "killed", "failed", "abandoned"]);

export default async function OverviewPage() {
  const [counts, recent] = await Promise.all([countJobsByStatus(), listJobs({ limit: 10 })]);
  const attention = JOB_STATUSES.filter((s) => ATTENTION.has(s)).reduce((n, s) => n + counts[s], 0);
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>Overview</h1>
          <p className="muted">All jobs by status. {attention > 0 ? `${fmtInt(attention)} need attention.` : "Nothing needs attention."}</p>
        </div>
      </div>
      <section className="grid cols-4" aria-label="Jobs by status">
        {JOB_STATUSES.map((s) => (
          <Link key={s} href={`/jobs?status=${s}`} className={`stat ${ATTENTION.has(s) && counts[s] > 0 ? "alert" : ""}`}>
            <div className="label">{STATUS_LABEL[s]}</div>
            <div className="value">{fmtInt(counts[s])}</div>
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
