import type { ReactNode } from "react";
import { getTokenUsage, TOP_JOBS, type TokenTotals, type TokenUsageQuery, type UsageRow } from "@/lib/modelcalls/usage";
import type { LatencyRange } from "@/lib/modelcalls/queries";
import { DataTable, num } from "../../components/data-table";
import { formatCount } from "@/lib/format/number";
import { JobLink } from "../../components/job-link";
import { RANGE_LABEL, formatTokens } from "./format";
import { formatUsd } from "@/lib/format/number";
import styles from "./model-calls.module.css";

/**
 * Tokens of the model calls in the page's range and filters, and what they cost by the configured
 * prices: in all, then per lane (direct calls and the provider's Batch API, each at its price), per
 * kind, per tenant and for the heaviest jobs.
 */
export async function TokenUsageSection({ query, range }: { query: TokenUsageQuery; range: LatencyRange }) {
  const usage = await getTokenUsage(query);
  const t = usage.total;
  return (
    <section className="panel" aria-labelledby="tokens-title" data-testid="token-usage">
      <h2 id="tokens-title">Tokens and estimated cost, last {RANGE_LABEL[range]}</h2>
      {t.calls === 0 ? (
        <p className="muted" data-testid="token-empty">
          No model call in this window reported its tokens.
        </p>
      ) : (
        <>
          <p data-testid="token-summary">
            <strong>{formatTokens(t.promptTokens + t.completionTokens)}</strong> ({formatCount(t.promptTokens)} prompt,{" "}
            {formatCount(t.completionTokens)} completion) in {formatCount(t.calls)} {t.calls === 1 ? "call" : "calls"},
            estimated <strong>{formatUsd(t.costUsd)}</strong>
            <Unpriced totals={t} />.
          </p>
          <p className="small muted">
            Tokens as the model endpoint counted them; the cost is an estimate from the per-model prices in
            BOUNDED_MODEL_PRICES (USD per million tokens), a batch's at the Batch API's price.
          </p>
          <div className={styles.usageTables}>
            <UsageTable
              title="Per lane"
              heading="Lane"
              rows={usage.byLane}
              label={(r) => (r.key === "batch" ? "Batch API" : "direct")}
              testId="tokens-by-lane"
            />
            <UsageTable
              title="Per model"
              heading="Model"
              rows={usage.byModel}
              label={(r) => <span className="mono">{r.key}</span>}
              testId="tokens-by-model"
            />
            <UsageTable
              title="Per kind"
              heading="Kind"
              rows={usage.byKind}
              label={(r) => <span className="mono">{r.key || "(no kind)"}</span>}
              testId="tokens-by-kind"
            />
            <UsageTable
              title="Per tenant"
              heading="Tenant"
              rows={usage.byTenant}
              label={(r) => r.key || "(no job)"}
              testId="tokens-by-tenant"
            />
            <UsageTable
              title={`Top ${TOP_JOBS} jobs`}
              heading="Job"
              rows={usage.byJob}
              label={(r) => <JobLink id={r.key} />}
              testId="tokens-by-job"
            />
          </div>
        </>
      )}
    </section>
  );
}

function Unpriced({ totals }: { totals: TokenTotals }) {
  return totals.unpriced ? <span className="muted"> (some models have no price and are left out)</span> : null;
}

function UsageTable({
  title,
  heading,
  rows,
  label,
  testId,
}: {
  title: string;
  heading: string;
  rows: UsageRow[];
  label: (row: UsageRow) => ReactNode;
  testId: string;
}) {
  return (
    <div>
      <h3 className={styles.usageHeading}>{title}</h3>
      <DataTable
        headings={[heading, num("Tokens"), num("Est. cost")]}
        rows={rows}
        testId={testId}
        label={`Tokens and estimated cost, ${title.toLowerCase()}`}
        empty={<p className="small muted">None in this window.</p>}
      >
        {(r) => (
          <tr key={r.key}>
            <td>{label(r)}</td>
            <td className="num">{formatTokens(r.promptTokens + r.completionTokens)}</td>
            <td className="num">
              {formatUsd(r.costUsd)}
              {r.unpriced ? (
                <span className="muted" title="Some tokens are of a model without a price">
                  *
                </span>
              ) : null}
            </td>
          </tr>
        )}
      </DataTable>
    </div>
  );
}
