import { sampleTableActivity } from "@/lib/reports/table-activity";
import { formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { requirePageViewer } from "@/lib/auth/principal";
import { PageHead } from "../../components/page-head";
import { DataTable, num } from "../../components/data-table";
import { formatPace } from "@/lib/format/rate";
import { retentionStatus, tableSizes } from "@/lib/retention/status";
import { RetentionPanel } from "./retention";

export const dynamic = "force-dynamic";
export const metadata = { title: "Database" };

export default async function DatabasePage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/database");
  // The retention's reads are catalog lookups and index ends: done while the activity sample waits.
  const sizesRead = tableSizes();
  const [{ intervalMs, tables }, sizes, retention] = await Promise.all([
    sampleTableActivity(2000),
    sizesRead,
    sizesRead.then((sizes) => retentionStatus({ sizes })),
  ]);
  const hot = tables.filter((t) => t.seqScansPerS >= 1 && t.liveRows < 10_000);
  return (
    <main className="page">
      <PageHead
        title="Database"
        description={
          <>
            What is kept and for how long, and table activity per second over the last {formatDuration(intervalMs)} (two
            snapshots of <code>pg_stat_user_tables</code>). Reload to sample again.
          </>
        }
      />
      <section className="panel">
        <h2>What to look for</h2>
        {hot.length ? (
          <p className="message warn">
            Small tables scanned repeatedly:{" "}
            {hot.map((t) => `${t.table} (${formatPace(t.seqScansPerS)} sequential scans/s)`).join(", ")}. A reference
            table read for every item is usually a missing cache.
          </p>
        ) : (
          <p className="message ok">No small table is being re-read sequentially right now.</p>
        )}
      </section>
      <RetentionPanel classes={retention} sizes={sizes} />
      <h2>Table activity</h2>
      <DataTable
        headings={[
          "Table",
          num("Seq scans /s"),
          num("Rows read by seq scans /s"),
          num("Index scans /s"),
          num("Inserts /s"),
          num("Updates /s"),
          num("Live rows"),
        ]}
        rows={tables}
      >
        {(t) => (
          <tr key={t.table}>
            <td className="mono">{t.table}</td>
            <td className="num">{formatPace(t.seqScansPerS)}</td>
            <td className="num">{formatPace(t.rowsReadBySeqScansPerS)}</td>
            <td className="num">{formatPace(t.idxScansPerS)}</td>
            <td className="num">{formatPace(t.insertsPerS)}</td>
            <td className="num">{formatPace(t.updatesPerS)}</td>
            <td className="num">{formatCount(t.liveRows)}</td>
          </tr>
        )}
      </DataTable>
    </main>
  );
}
