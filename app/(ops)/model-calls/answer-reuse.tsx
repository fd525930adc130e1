import { getAnswerReuseByKind } from "@/lib/answers/stats";
import { env } from "@/lib/env";
import type { LatencyRange } from "@/lib/modelcalls/queries";
import { formatCount } from "@/lib/format/number";
import { DataTable, num } from "../../components/data-table";
import { ClearAnswersForm } from "./clear-answers-form";
import { RANGE_LABEL, formatTokens } from "./format";
import { formatUsd } from "@/lib/format/number";

const percent = (rate: number | null) => (rate === null ? "—" : `${(rate * 100).toFixed(1)} %`);

/**
 * Rows categorised in the page's range, per kind: how many asked the model, how many shared an
 * earlier row's answer within their job, how many were answered from the tenant's stored answers,
 * and the model spend that reuse avoided — the page's kind alone when it filters by one. Then the
 * operator's form to clear a tenant's answers.
 */
export async function AnswerReuseSection({
  window,
  range,
  kind,
  canClear,
}: {
  window: { from: string; to: string };
  range: LatencyRange;
  kind: string | undefined;
  canClear: boolean;
}) {
  const all = await getAnswerReuseByKind({ from: new Date(window.from), to: new Date(window.to) });
  const kinds = kind ? all.filter((k) => k.kind === kind) : all;
  const ttlDays = env().BOUNDED_CATEGORY_ANSWER_TTL_DAYS;
  return (
    <section className="panel" aria-labelledby="reuse-title" data-testid="answer-reuse">
      <h2 id="reuse-title">
        Answers reused{kind ? ` by ${kind}` : ""}, last {RANGE_LABEL[range]}
      </h2>
      <p className="small muted">
        A row's category is asked once per question (its normalised counterparty and description, the amount's sign, the
        category list, the prompt version and the model): rows of a job with the same question share one answer, and a
        tenant's answers are stored for {formatCount(ttlDays)} {ttlDays === 1 ? "day" : "days"}{" "}
        (BOUNDED_CATEGORY_ANSWER_TTL_DAYS) and reused by its later imports. Saved tokens are each reused row's share of
        the call that first answered it; the cost is estimated from BOUNDED_MODEL_PRICES.
      </p>
      <DataTable
        headings={[
          "Kind",
          num("Rows"),
          num("Asked the model"),
          num("Shared in job"),
          num("From stored answers"),
          num("Cache hit rate"),
          num("Calls saved"),
          num("Tokens saved"),
          num("Cost avoided"),
        ]}
        rows={kinds}
        testId="answer-reuse-by-kind"
        label="Category answers reused, per kind"
        empty={<p className="small muted">No categorised rows in this window.</p>}
      >
        {(k) => (
          <tr key={k.kind}>
            <td className="mono">{k.kind}</td>
            <td className="num">{formatCount(k.model + k.job + k.cache)}</td>
            <td className="num">{formatCount(k.model)}</td>
            <td className="num">{formatCount(k.job)}</td>
            <td className="num">{formatCount(k.cache)}</td>
            <td className="num">{percent(k.cacheHitRate)}</td>
            <td className="num">{k.saved.calls.toFixed(1)}</td>
            <td className="num">{formatTokens(k.saved.promptTokens + k.saved.completionTokens)}</td>
            <td className="num">
              {formatUsd(k.saved.costUsd)}
              {k.saved.unpriced ? (
                <span className="muted" title="Some tokens are of a model without a price">
                  *
                </span>
              ) : null}
            </td>
          </tr>
        )}
      </DataTable>
      <h3>Clear a tenant's stored answers</h3>
      <p className="small muted">
        Its next imports ask the model again for every question (a job already running still shares answers between its
        own rows). Audited.
      </p>
      <ClearAnswersForm canAct={canClear} />
    </section>
  );
}
