import type { TokenBudgetState } from "@/lib/ratelimit/provider-tokens";
import { formatAgo, formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../components/format";
import { DataTable, num } from "../../components/data-table";
import styles from "./limiter.module.css";
import type { ProviderSectionProps } from "./provider-limits";

const BUDGET_LABEL: Record<TokenBudgetState["budget"], string> = {
  tokens: "all tokens (prompt + answer)",
  input: "input tokens",
  output: "output tokens",
};
const VARIABLE: Record<TokenBudgetState["budget"], string> = {
  tokens: "BOUNDED_MODEL_TPM",
  input: "BOUNDED_MODEL_INPUT_TPM",
  output: "BOUNDED_MODEL_OUTPUT_TPM",
};

/** Production ms from `asOf` to `iso` (the provider's waits are said in real time). */
const untilMs = (iso: string, asOf: string, timeScale: number) =>
  Math.max(0, (Date.parse(iso) - Date.parse(asOf)) / timeScale);

/**
 * The model provider's tokens per minute: the limit in force and where it came from (configured,
 * or learnt from the answers' `x-ratelimit-*` headers and when), what the shared bucket holds now
 * (after what calls still answering reserved), the provider's own last word (remaining, and when it
 * is whole again: "provider says"), and a pause a 429 asked every worker for.
 */
export function TokenLimits({ providers, asOf, timeScale }: ProviderSectionProps) {
  const model = providers?.find((p) => p.provider === "model");
  return (
    <section className="panel" aria-labelledby="token-limits-title">
      <h2 id="token-limits-title">Model tokens per minute (all workers)</h2>
      <p className="small muted">
        Every model call reserves its prompt’s tokens and an estimate of its answer before it is sent, and is settled
        from the answer’s usage. The limit is configured, or learnt from the provider’s own rate-limit headers and kept
        current by every answer.
      </p>
      {!model ? (
        <p className="form-error" role="alert">
          The token limits cannot be read right now (Redis does not answer).
        </p>
      ) : (
        <>
          {model.tokenLimits.pausedUntil ? (
            <p className="form-error" role="alert" data-testid="token-pause">
              Paused for every worker until {fmtTime(model.tokenLimits.pausedUntil)} (in{" "}
              {formatDuration(untilMs(model.tokenLimits.pausedUntil, asOf, timeScale))}):{" "}
              {model.tokenLimits.pauseReason ?? "the provider answered 429"}.
            </p>
          ) : null}
          <DataTable
            headings={["Budget", num("Limit"), "From", "Available now", "Provider says"]}
            rows={model.tokenLimits.budgets}
            testId="token-limits"
            label="Model tokens per minute"
            empty={
              model.tokenLimits.unannounced
                ? "No token limit: none is configured, and the provider’s answers announce none. Calls are held to the calls in flight and requests per second above."
                : "No token limit known yet: none is configured (BOUNDED_MODEL_TPM), and no answer has announced one. Until one does, four calls at a time ask the provider."
            }
          >
            {(b) => (
              <tr key={b.budget} data-budget={b.budget}>
                <td className={styles.nowrap}>{BUDGET_LABEL[b.budget]}</td>
                <td className={`num ${styles.nowrap}`}>{formatCount(b.limit)} tokens/min</td>
                <td>
                  {b.source === "configured" ? (
                    <>
                      configured <span className="mono small">{VARIABLE[b.budget]}</span>
                    </>
                  ) : (
                    "learnt from the provider’s headers"
                  )}
                  {b.announced ? (
                    <div className="small muted">
                      last announced {formatAgo(Math.max(0, Date.parse(asOf) - Date.parse(b.announced.at)) / timeScale)}
                    </div>
                  ) : null}
                </td>
                <td className={styles.nowrap}>
                  <span className={styles.meter} aria-hidden="true">
                    <span style={{ width: `${Math.max(0, Math.min(100, (b.available / b.limit) * 100))}%` }} />
                  </span>
                  {formatCount(Math.max(0, Math.floor(b.available)))} of {formatCount(b.limit)} tokens
                </td>
                <td>
                  {b.announced ? (
                    <>
                      {formatCount(b.announced.remaining)} of {formatCount(b.announced.limit)} remaining
                      <div className="small muted">
                        {untilMs(b.announced.resetAt, asOf, timeScale) > 0
                          ? `whole again in ${formatDuration(untilMs(b.announced.resetAt, asOf, timeScale))}`
                          : "whole again now"}
                      </div>
                    </>
                  ) : (
                    "—"
                  )}
                </td>
              </tr>
            )}
          </DataTable>
        </>
      )}
    </section>
  );
}
