import type { ProviderState } from "@/lib/ratelimit/provider";
import { formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { DataTable, num } from "../../components/data-table";
import { describeWaiting } from "./format";
import styles from "./limiter.module.css";

const fmtTokens = (n: number) => (n >= 10 || Number.isInteger(n) ? formatCount(Math.floor(n)) : n.toFixed(2));
const fmtRate = (rps: number) => (Number.isInteger(rps) ? formatCount(rps) : rps.toFixed(2));

/** What the provider sections of /limiter read: every provider's state (null: Redis did not answer), as of when, at which time scale. */
export interface ProviderSectionProps {
  providers: ProviderState[] | null;
  asOf: string;
  timeScale: number;
}

/**
 * The outside providers' shared limits (model, OCR): calls in flight now of C, tokens now of the
 * burst refilled at R per second, who waits now, and how often and how long calls waited for a
 * slot — every worker process together, read from Redis.
 */
export function ProviderLimits({ providers, asOf, timeScale }: ProviderSectionProps) {
  return (
    <section className="panel" aria-labelledby="providers-title">
      <h2 id="providers-title">Provider limits (all workers)</h2>
      <p className="small muted">
        Every model and OCR call takes a provider slot first: at most C calls in flight and R requests per second,
        shared by every worker. A short wait is waited; inside a rescheduling job a long one gives the worker slot back.
        A call within two minutes of its job&rsquo;s deadline is urgent: it takes the next free slot and the next tokens
        before any other, the earliest deadline first.
      </p>
      {providers === null ? (
        <p className="form-error" role="alert">
          The provider limits cannot be read right now (Redis does not answer).
        </p>
      ) : (
        <DataTable
          headings={[
            "Provider",
            "In flight now",
            "Tokens now",
            "Waiting now",
            num("Calls that waited"),
            num("Time waiting"),
            num("Mean wait"),
            num("Gave up waiting"),
          ]}
          rows={providers}
          testId="provider-limits"
          label="Provider limits"
        >
          {(p) => (
            <tr key={p.provider} data-provider={p.provider}>
              <td className={`mono ${styles.nowrap}`}>{p.provider}</td>
              <td className={styles.nowrap}>
                <span className={styles.meter} aria-hidden="true">
                  <span style={{ width: `${Math.min(100, (p.inFlight / p.concurrency) * 100)}%` }} />
                </span>
                {formatCount(p.inFlight)} of {formatCount(p.concurrency)} calls
              </td>
              <td className={styles.nowrap}>
                {fmtTokens(p.tokens)} of {formatCount(p.capacity)} tokens
                <div className="small muted">refill {fmtRate(p.rps)} requests/s</div>
              </td>
              <td className={styles.nowrap}>{describeWaiting(p.waiting, asOf, timeScale)}</td>
              <td className="num">{formatCount(p.waits)} calls</td>
              <td className="num">{formatDuration(p.waitSeconds * 1000)}</td>
              <td className="num">{p.waits === 0 ? "—" : formatDuration((p.waitSeconds * 1000) / p.waits)}</td>
              <td className="num">{formatCount(p.gaveUp)} calls</td>
            </tr>
          )}
        </DataTable>
      )}
    </section>
  );
}
