import { formatDays, formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { formatBytes } from "@/lib/units";
import type { RetentionStatus, TableSize } from "@/lib/retention/status";
import { fmtTime } from "../../components/format";

/** Tables no class prunes: each tenant's current data, kept until the tenant goes. */
const KEPT_TABLES = ["Tenant", "MarketplaceRecord", "Invoice", "Ad", "CardImage", "QuotaPack"];

/**
 * What Bounded keeps and for how long (lib/retention): each class's days, its tables' sizes, the
 * oldest row it still holds and whether the pass keeps up; then what is kept without a limit.
 */
export function RetentionPanel({ classes, sizes }: { classes: RetentionStatus[]; sizes: Map<string, TableSize> }) {
  const behind = classes.filter((c) => c.overdueSeconds > 3_600);
  const total = [...sizes.values()].reduce((a, s) => a + s.bytes, 0);
  return (
    <section className="panel" aria-labelledby="retention-heading">
      <h2 id="retention-heading">Retention</h2>
      <p className="muted small">
        {formatBytes(total)} in all. A pass every ten minutes removes what each class keeps no longer (
        <code>npm run retention -- --dry-run</code> shows what the next one would); a job that waits on a person is
        never pruned.
      </p>
      {behind.length ? (
        <p className="message warn" data-testid="retention-behind">
          Behind:{" "}
          {behind
            .map((c) => `${c.name} holds rows ${formatDuration(c.overdueSeconds * 1000)} past its retention`)
            .join("; ")}
          . The pass is not keeping up — look at the workers' “retention pass” log lines.
        </p>
      ) : (
        <p className="message ok" data-testid="retention-ok">
          Every class is within its retention.
        </p>
      )}
      <div className="grid cols-2" data-testid="retention">
        {classes.map((c) => (
          <article key={c.name} className="stat" data-class={c.name} aria-labelledby={`retention-${c.name}`}>
            <h3 id={`retention-${c.name}`} style={{ margin: "0 0 0.4rem" }}>
              <span className="mono">{c.name}</span> · kept{" "}
              {c.days === null ? "as each tenant chose" : formatDays(c.days)}
            </h3>
            <p className="small" style={{ marginTop: 0 }}>
              {c.holds}.
            </p>
            <dl className="facts small">
              <dt>Set by</dt>
              {c.variable ? (
                <dd className="mono">{c.variable}</dd>
              ) : (
                <dd>
                  each tenant (<code>PUT /api/tenants/&lt;tenant&gt;/retention</code>):{" "}
                  {c.tenantsChoosing
                    ? `${formatCount(c.tenantsChoosing)} chose a retention`
                    : "none chose one, all kept"}
                </dd>
              )}
              <dt>Oldest kept</dt>
              <dd>{c.oldestKept ? fmtTime(c.oldestKept.toISOString()) : "none"}</dd>
              <dt>Tables</dt>
              <dd>
                {c.tables.map((t) => (
                  <div key={t.table}>
                    <span className="mono">{t.table}</span> {formatBytes(t.bytes)}, {formatCount(t.rowsEstimate)} rows
                  </div>
                ))}
              </dd>
            </dl>
          </article>
        ))}
      </div>
      <p className="muted small" data-testid="retention-kept">
        Kept without a limit: {KEPT_TABLES.map((t) => `${t} ${formatBytes(sizes.get(t)?.bytes ?? 0)}`).join(", ")} —
        each tenant's current data (its marketplace records, invoices, ads and images, its quota), until it is deleted.
      </p>
    </section>
  );
}
