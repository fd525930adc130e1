import { sampleTableActivity } from "@/lib/database/table-stats";
import { formatDuration } from "@/lib/format/duration";
import { fmtInt } from "../../components/format";
import { requirePageViewer } from "@/lib/auth/principal";
import { PageHead } from "../../components/page-head";
import { DataTable, num } from "../../components/data-table";

export const dynamic = "force-dynamic";
export const metadata = { title: "Database" };

const rate = (n: number) => (n === 0 ? "0" : n < 10 ? n.toFixed(1) : fmtInt(Math.round(n)));

export default async function DatabasePage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/database");
  const { intervalMs, tables } = await sampleTableActivity(2000);
  const hot = tables.filter((t) => t.seqScansPerS >= 1 && t.liveRows < 10_000);
  return (
    <main className="page">
      <PageHead
        title="Database"
        description={
          <>
            Table activity per second over the last {formatDuration(intervalMs)} (two snapshots of <code>pg_stat_user_tables</code>). Reload to sample again.
          </>
        }
      />
      <section className="panel">
        <h2>What to look for</h2>
        {hot.length ? (
          <p className="message warn">
            Small tables scanned repeatedly: {hot.map((t) => `${t.table} (${rate(t.seqScansPerS)} sequential scans/s)`).join(", ")}. A reference table read for every
            item is usually a missing cache.
          </p>
        ) : (
          <p className="message ok">No small table is being re-read sequentially right now.</p>
        )}
      </section>
      <DataTable
        headings={["Table", num("Seq scans /s"), num("Rows read by seq scans /s"), num("Index scans /s"), num("Inserts /s"), num("Updates /s"), num("Live rows")]}
        rows={tables}
      >
        {(t) => (
          <tr key={t.table}>
            <td className="mono">{t.table}</td>
            <td className="num">{rate(t.seqScansPerS)}</td>
            <td className="num">{rate(t.rowsReadBySeqScansPerS)}</td>
            <td className="num">{rate(t.idxScansPerS)}</td>
            <td className="num">{rate(t.insertsPerS)}</td>
            <td className="num">{rate(t.updatesPerS)}</td>
            <td className="num">{fmtInt(t.liveRows)}</td>
          </tr>
        )}
      </DataTable>
    </main>
  );
}
