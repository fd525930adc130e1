import { formatDays, formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { formatBytes } from "@/lib/units";
import type { RetentionStatus, TableSize } from "@/lib/retention/status";
import { DataTable, num } from "../../components/data-table";
import { fmtTime } from "../../components/format";

/** Tables no class prunes: the jobs' own rows and the tenants' results, kept until a tenant goes. */
const KEPT_TABLES = ["Job", "Transaction", "CategoryAnswer", "MarketplaceRecord", "Invoice", "CardImage"];

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
      <DataTable
        headings={["Class", num("Kept"), "Oldest kept", "Tables (size, rows)", "What it holds"]}
        rows={classes}
        testId="retention"
      >
        {(c) => (
          <tr key={c.name}>
            <td className="mono">{c.name}</td>
            <td className="num">
              {formatDays(c.days)}
              <div className="muted small mono">{c.variable}</div>
            </td>
            <td>{c.oldestKept ? fmtTime(c.oldestKept.toISOString()) : "—"}</td>
            <td className="small">
              {c.tables.map((t) => (
                <div key={t.table}>
                  <span className="mono">{t.table}</span> {formatBytes(t.bytes)}, ~{formatCount(t.rowsEstimate)}
                </div>
              ))}
            </td>
            <td className="small">{c.holds}</td>
          </tr>
        )}
      </DataTable>
      <p className="muted small" data-testid="retention-kept">
        Kept without a limit: {KEPT_TABLES.map((t) => `${t} ${formatBytes(sizes.get(t)?.bytes ?? 0)}`).join(", ")} — a
        job's row with its outcome and counts, and each tenant's own results.
      </p>
    </section>
  );
}
