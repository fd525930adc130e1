import Link from "next/link";
import { formatCount } from "@/lib/format/number";
import type { JobDetail } from "@/lib/job-views/queries";
import { routeFor } from "@/lib/model-providers";
import { ENDED_IMPORT_STATUSES, reaskComparison, reaskOf, reaskPlans, type ReaskComparison } from "@/lib/reasks/reask";
import { planSentence } from "@/lib/reasks/reask-messages";
import { DataTable, FirstOf, num } from "../../../components/data-table";
import { fmtTime } from "../../../components/format";
import { ReaskForm } from "./reask-form";

/** Why the re-ask form is disabled for this viewer and import; null when it is not. */
function reaskDisabledReason(job: JobDetail, isOperator: boolean): string | null {
  if (!isOperator) return "Only operators can ask rows again; you are signed in as a viewer.";
  if (job.children.length > 0) return "This import was split into parts: ask the parts' rows again instead.";
  if (!(ENDED_IMPORT_STATUSES as readonly string[]).includes(job.status))
    return "Rows are asked again once the import has ended.";
  return null;
}

/**
 * An import's re-ask: the form (a provider, which rows, the plan before sending) and the rows asked
 * again so far, each earlier answer beside the new one. A re-ask job's page shows its import and
 * its own rows. Nothing for other kinds.
 */
export async function ReaskPanel({ job, isOperator }: { job: JobDetail; isOperator: boolean }) {
  if (job.kind === "category_reask") {
    const of = await reaskOf(job.id);
    const comparison = await reaskComparison(job.id, "reask");
    return (
      <section className="panel" aria-labelledby="reask-heading" data-testid="reask-panel">
        <h2 id="reask-heading">Rows asked again</h2>
        {of ? (
          <p className="small">
            Rows of import{" "}
            <Link href={`/jobs/${of.sourceJobId}`} className="mono">
              {of.sourceJobId}
            </Link>{" "}
            asked again on <span className="mono">{of.provider}</span>.
          </p>
        ) : null}
        <Comparison comparison={comparison} />
      </section>
    );
  }
  if (job.kind !== "csv_import" || job.detailPrunedAt) return null;
  const [plans, comparison] = await Promise.all([reaskPlans(job.id), reaskComparison(job.id, "import")]);
  const first = routeFor("csv_import")[0]!;
  return (
    <section className="panel" aria-labelledby="reask-heading" data-testid="reask-panel">
      <h2 id="reask-heading">Ask rows again on another model</h2>
      <p className="muted small">
        Asks the rows a fallback answered (any model but <span className="mono">{first.model}</span>, first on the
        import's route), its failed rows, or all of them again on the provider you choose, as a job of its own. Each
        earlier answer is kept beside the new one; a failed row that is valid now is imported.
      </p>
      <ReaskForm
        jobId={job.id}
        choices={plans.map((p) => ({ ...p, sentence: planSentence(p) }))}
        canAct={reaskDisabledReason(job, isOperator) === null}
        disabledReason={reaskDisabledReason(job, isOperator)}
        defaultProvider={first.name}
      />
      {comparison.total > 0 ? <Comparison comparison={comparison} /> : null}
    </section>
  );
}

/** The rows asked again: "12 rows asked again, 3 got another category", then each row's two answers. */
function Comparison({ comparison }: { comparison: ReaskComparison }) {
  return (
    <>
      <p className="small" data-testid="reask-summary">
        <strong>{formatCount(comparison.total)}</strong> {comparison.total === 1 ? "row" : "rows"} asked again;{" "}
        <strong>{formatCount(comparison.changed)}</strong> got another category.
      </p>
      <DataTable
        headings={[num("Row"), "Earlier answer", "New answer", "Changed", "Asked"]}
        rows={comparison.rows}
        empty="No row asked again yet."
        testId="reask-rows"
        label="Rows asked again, earlier and new answers"
        after={<FirstOf shown={comparison.rows.length} total={comparison.total} />}
      >
        {(r) => (
          <tr key={`${r.reaskJobId}:${r.row}`}>
            <td className="num">{r.row}</td>
            <td>
              {r.previousSlug ?? "failed"}{" "}
              {r.previousModel ? <span className="muted small mono">{r.previousModel}</span> : null}
            </td>
            <td>
              {r.slug} <span className="muted small mono">{r.model}</span>
            </td>
            <td>{r.slug === r.previousSlug ? "no" : "yes"}</td>
            <td className="small">{fmtTime(r.at.toISOString())}</td>
          </tr>
        )}
      </DataTable>
    </>
  );
}
