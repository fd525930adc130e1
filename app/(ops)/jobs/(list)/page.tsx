import Link from "next/link";
import { jobFilterSchema, listJobs } from "@/lib/job-views/queries";
import { JOB_STATUSES, STATUS_LABEL } from "@/lib/core/job-statuses";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { JobsTable } from "../../../components/jobs-table";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { BULK_RETRY_CAP } from "@/lib/actions/bulk-retry";
import { BulkRetryForm } from "../bulk-retry-form";
import { BulkReaskForm } from "../bulk-reask-form";
import { BULK_REASK_CAP } from "@/lib/reasks/bulk";
import { modelRouting } from "@/lib/model-providers";
import { PageHead } from "../../../components/page-head";
import { FilterForm } from "../../../components/filter-form";
import { SelectField, TextField } from "../../../components/field";
import { formatCount } from "@/lib/format/number";

export const dynamic = "force-dynamic";
export const metadata = { title: "Jobs" };

type Search = Record<string, string | string[] | undefined>;

export default async function JobsPage({ searchParams }: { searchParams: Promise<Search> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/jobs");
  const isOperator = hasRole(principal, "operator");
  const raw = Object.fromEntries(
    Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== ""),
  ) as Record<string, string>;
  const parsed = jobFilterSchema.safeParse(raw);
  const filter = parsed.success ? parsed.data : jobFilterSchema.parse({});
  const { jobs, nextAfter } = await listJobs(filter);
  const nextParams = new URLSearchParams({ ...raw, after: nextAfter ?? "" });
  return (
    <main className="page">
      <PageHead
        title="Jobs"
        description="Newest first. Search by short id (the 8 characters pages show), full id, tenant, file name, or what a job processed: a row's counterparty or description, a failure's reason."
      />
      <FilterForm clearHref="/jobs">
        <TextField
          label="Search"
          type="search"
          name="q"
          defaultValue={raw.q}
          placeholder="id, tenant, file, or a row's text"
          style={{ minWidth: "17rem" }}
          title="The start of a job id (e.g. 3f2a9c1e), a full id, the start of a tenant, part of an uploaded file's name, or (3 characters or more) part of an imported row or a failure's reason; % and _ are plain characters"
        />
        <SelectField
          label="Status"
          name="status"
          any="any"
          defaultValue={raw.status ?? ""}
          options={JOB_STATUSES.map((s) => ({ value: s, label: STATUS_LABEL[s] }))}
        />
        <SelectField label="Kind" name="kind" any="any" defaultValue={raw.kind ?? ""} options={JOB_KINDS} />
        <TextField label="Tenant" name="tenant" defaultValue={raw.tenant} placeholder="e.g. acme" />
      </FilterForm>
      {!parsed.success ? (
        <p className="form-error">
          Some filters were not understood and were ignored:{" "}
          {parsed.error.issues.map((i) => i.path.join(".")).join(", ")}.
        </p>
      ) : null}
      <JobsTable jobs={jobs} />
      <section className="panel" aria-labelledby="bulk-heading" style={{ marginTop: "1rem" }}>
        <h2 id="bulk-heading">Retry many jobs</h2>
        <p className="muted small">
          Every job that matches and can be retried (timed out, stopped, failed, abandoned; split jobs through their
          parts) goes back to its queue and resumes at its cursor. Preview first; at most {formatCount(BULK_RETRY_CAP)}{" "}
          at once.
        </p>
        <BulkRetryForm
          kinds={JOB_KINDS}
          statuses={RETRYABLE_STATUSES.map((s) => ({ value: s, label: STATUS_LABEL[s] }))}
          canAct={isOperator}
          disabledReason={isOperator ? null : "Only operators can retry jobs; you are signed in as a viewer."}
        />
      </section>
      <section className="panel" aria-labelledby="bulk-reask-heading" style={{ marginTop: "1rem" }}>
        <h2 id="bulk-reask-heading">Ask many imports' rows again on another model</h2>
        <p className="muted small">
          Every ended import that matches and has such rows gets a re-ask of its own on the provider chosen, each
          earlier answer kept beside the new one (an import's page shows both, and re-asks one import with its plan).
          Preview first; at most {formatCount(BULK_REASK_CAP)} imports at once.
        </p>
        <BulkReaskForm
          providers={modelRouting().providers.map((p) => p.name)}
          canAct={isOperator}
          disabledReason={isOperator ? null : "Only operators can ask rows again; you are signed in as a viewer."}
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
