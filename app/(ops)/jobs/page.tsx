import Link from "next/link";
import { jobFilterSchema, listJobs } from "@/lib/jobs/queries";
import { JOB_STATUSES, STATUS_LABEL } from "@/lib/jobs/statuses";
import { JOB_KINDS } from "@/lib/queues/catalog";
import { JobsTable } from "../../components/jobs-table";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { RETRYABLE_STATUSES } from "@/lib/jobs/retry";
import { BULK_RETRY_CAP } from "@/lib/jobs/bulk-retry";
import { BulkRetryForm } from "./bulk-retry-form";

export const dynamic = "force-dynamic";
export const metadata = { title: "Jobs" };

type Search = Record<string, string | string[] | undefined>;

export default async function JobsPage({ searchParams }: { searchParams: Promise<Search> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/jobs");
  const isOperator = hasRole(principal, "operator");
  const raw = Object.fromEntries(Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== "")) as Record<string, string>;
  const parsed = jobFilterSchema.safeParse(raw);
  const filter = parsed.success ? parsed.data : jobFilterSchema.parse({});
  const { jobs, nextAfter } = await listJobs(filter);
  const nextParams = new URLSearchParams({ ...raw, after: nextAfter ?? "" });
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>Jobs</h1>
          <p className="muted">Newest first. Search by job id or tenant.</p>
        </div>
      </div>
      <form className="filters" method="get" role="search">
        <label className="field">
          Search
          <input type="search" name="q" defaultValue={raw.q} placeholder="job id or tenant" />
        </label>
        <label className="field">
          Status
          <select name="status" defaultValue={raw.status ?? ""}>
            <option value="">any</option>
            {JOB_STATUSES.map((s) => (
              <option key={s} value={s}>
                {STATUS_LABEL[s]}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          Kind
          <select name="kind" defaultValue={raw.kind ?? ""}>
            <option value="">any</option>
            {JOB_KINDS.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          Tenant
          <input type="text" name="tenant" defaultValue={raw.tenant} placeholder="e.g. acme" />
        </label>
        <button type="submit">Filter</button>
        <Link href="/jobs" className="button secondary">
          Clear
        </Link>
      </form>
      {!parsed.success ? <p className="form-error">Some filters were not understood and were ignored: {parsed.error.issues.map((i) => i.path.join(".")).join(", ")}.</p> : null}
      <JobsTable jobs={jobs} />
      <section className="panel" aria-labelledby="bulk-heading" style={{ marginTop: "1rem" }}>
        <h2 id="bulk-heading">Retry many jobs</h2>
        <p className="muted small">
          Every job that matches and can be retried (timed out, stopped, failed, abandoned; split jobs through their parts) goes back to its queue and resumes at its
          cursor. Preview first; at most {BULK_RETRY_CAP.toLocaleString("en-US")} at once.
        </p>
        <BulkRetryForm
          kinds={JOB_KINDS}
          statuses={RETRYABLE_STATUSES.map((s) => ({ value: s, label: STATUS_LABEL[s] }))}
          canAct={isOperator}
          disabledReason={isOperator ? null : "Only operators can retry jobs; you are signed in as a viewer."}
        />
      </section>
      {nextAfter ? (
        <div className="pager">
          <Link href={`/jobs?${nextParams}`} className="button secondary">
            Older jobs →
          </Link>
        </div>
      ) : null}
    </main>
  );
}
