import { formatBudget } from "@/lib/budgets/format";
import { formatAgo, formatDuration } from "@/lib/format/duration";
import {
  formatRatio,
  getBudgetReport,
  MIN_CALLS_TO_JUDGE,
  type BudgetReport,
  type BudgetRisk,
  type BudgetRow,
  type LiveWorker,
  type RiskEstimate,
} from "@/lib/reports/budgets";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../components/format";
import { requirePageViewer } from "@/lib/auth/principal";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { DataTable, num } from "../../components/data-table";

export const dynamic = "force-dynamic";
export const metadata = { title: "Budgets" };

/** Each queue and kind's effective budget, whether live workers agree, and whether its jobs fit in it. */
export default async function BudgetsPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/budgets");
  const report = await getBudgetReport();
  const drifting = report.rows.filter((r) => r.status === "drift");

  return (
    <main className="page">
      <PageHead
        title="Budgets"
        description={
          <>
            How long each job may run. At the <strong>soft</strong> limit a job ends cleanly as “timed out”; at the{" "}
            <strong>hard</strong> limit the runtime stops it. Durations are production values. Updated{" "}
            {fmtTime(report.generatedAt)} — reload for fresh numbers.
          </>
        }
      />

      <BudgetWarnings report={report} drifting={drifting} />

      <Summary report={report} drifting={drifting} />

      <EffectiveBudgets report={report} />

      <RiskPanel report={report} />

      <WorkersPanel report={report} />

      <p className="small muted">
        Same data as JSON: <a href="/api/budgets">/api/budgets</a>
      </p>
    </main>
  );
}

/** What is wrong, above everything: no live worker, an invalid configuration, drift, a time scale other than 1. */
function BudgetWarnings({ report, drifting }: { report: BudgetReport; drifting: BudgetRow[] }) {
  return (
    <>
      {report.workersError ? (
        <p className="message bad" role="alert">
          {report.workersError}. The “live workers” columns below are empty because of it, not because workers agree.
        </p>
      ) : report.workers.length === 0 ? (
        <p className="message bad" role="alert">
          No worker process is publishing its budgets — workers are down or not started. Nothing below is confirmed by a
          running worker; jobs wait in their queues until a worker starts.
        </p>
      ) : null}
      {report.configurationProblems.length > 0 ? (
        <div className="message bad" role="alert">
          <strong>This configuration is invalid; a worker started with it refuses to start:</strong>
          <ul>
            {report.configurationProblems.map((p) => (
              <li key={p}>{p}</li>
            ))}
          </ul>
        </div>
      ) : null}
      {drifting.length > 0 ? (
        <p className="message bad" role="alert">
          {drifting.length === 1 ? "1 queue runs" : `${drifting.length} queues run`} with budgets that differ from the
          configuration or between workers: {drifting.map((r) => `${r.queue}/${r.kind}`).join(", ")}. See “Live workers
          use” below.
        </p>
      ) : null}
      {report.timeScale !== 1 ? (
        <p className="message warn">
          Time scale: <span className="mono">BOUNDED_TIME_SCALE={report.timeScale}</span> in this process. Budgets are
          shown in production time; jobs really get {report.timeScale}× of them (10 min →{" "}
          {formatDuration(scaledMs(600_000, report.timeScale))}). Recorded call durations are divided by{" "}
          {report.timeScale} for the risk estimates.
        </p>
      ) : null}
    </>
  );
}

/** The counts: live workers, budgets drifting, kinds at risk, and queues no live worker serves. */
function Summary({ report, drifting }: { report: BudgetReport; drifting: BudgetRow[] }) {
  const atRisk = report.rows.filter((r) => r.risk.atRisk);
  const notServed = report.rows.filter((r) => r.status === "not_served");
  return (
    <section className="grid cols-4" aria-label="Summary" style={{ marginBottom: "1.25rem" }}>
      <Stat label="Live workers" value={formatCount(report.workers.length)} alert={report.workers.length === 0} />
      <Stat label="Budgets drifting" value={formatCount(drifting.length)} alert={drifting.length > 0} />
      <Stat label="At risk of timing out" value={formatCount(atRisk.length)} alert={atRisk.length > 0} />
      <Stat label="Not served by a live worker" value={formatCount(notServed.length)} />
    </section>
  );
}

/** One row per queue and kind: its budget, where it comes from, what live workers use, and its risk. */
function EffectiveBudgets({ report }: { report: BudgetReport }) {
  return (
    <section className="panel">
      <h2>Effective budgets</h2>
      <p className="small muted">
        One row per queue and job kind. Precedence: environment override of the queue › task › queue › global default
        (10 min / 15 min).
      </p>
      <DataTable
        headings={[
          "Queue / kind",
          "Soft / hard",
          "Source and why",
          "Live workers use",
          `Risk (last ${report.windowDays} days)`,
        ]}
        rows={report.rows}
        label="Effective budgets"
        style={{ tableLayout: "fixed", overflowWrap: "anywhere" }}
        columnWidths={["14%", "14%", "26%", "26%", "20%"]}
      >
        {(row) => <BudgetRowView key={`${row.queue}/${row.kind}`} row={row} />}
      </DataTable>
    </section>
  );
}

/** A queue and kind's row of the effective budgets. */
function BudgetRowView({ row }: { row: BudgetRow }) {
  return (
    <tr data-queue={row.queue} data-kind={row.kind} data-status={row.status} data-risk={row.risk.status}>
      <td>
        <div className="mono">{row.queue}</div>
        <div className="small muted mono">{row.kind}</div>
      </td>
      <td className="num" style={{ textAlign: "left" }}>
        <strong data-budget>{formatBudget(row.configuration)}</strong>
        {row.configuration.problem ? (
          <div>
            <span className="badge bad">invalid</span>
          </div>
        ) : null}
      </td>
      <td>
        <div className="mono" data-source>
          {row.configuration.source}
        </div>
        <div className="small muted">{row.configuration.why}</div>
        {row.configuration.problem ? (
          <div className="small" style={{ color: "var(--bad)" }}>
            {row.configuration.problem}
          </div>
        ) : null}
      </td>
      <td>
        <RuntimeCell row={row} />
      </td>
      <td data-risk-summary>
        <RiskBadge risk={row.risk} />
        <div className="small">{row.risk.summary}</div>
      </td>
    </tr>
  );
}

/** Whether the largest and the median job of the window fit in the soft budget, per queue and kind. */
function RiskPanel({ report }: { report: BudgetReport }) {
  return (
    <section className="panel">
      <h2>Will the jobs fit? (last {report.windowDays} days)</h2>
      <p className="small muted">
        Expected time = the p99 of a job&apos;s model calls one after another: n × the mean call + (the p99 call − the
        mean) × √n for its n calls (items × calls per item, from the calls recorded in the last {report.windowDays}{" "}
        days; judged from {MIN_CALLS_TO_JUDGE} calls up); for imports and document batches, whose items run side by
        side, the projection each job makes at its start (its rate from items in flight and the provider's limits, plus
        its slowest item). Shown for the largest and the median job of the window, with the ratio to the soft budget:
        above 1× a job that size is expected to time out — or, for those two kinds, splits itself into parts that fit.
      </p>
      <DataTable
        headings={[
          "Queue / kind",
          num("Jobs"),
          num("Mean per call"),
          num("p99 per call"),
          num("Calls per item"),
          num("Largest job"),
          num("Median job"),
          num("Soft budget"),
          "",
        ]}
        rows={report.rows}
        label="Risk per queue and kind"
      >
        {(row) => <RiskRow key={`${row.queue}/${row.kind}`} row={row} />}
      </DataTable>
    </section>
  );
}

/** The worker processes publishing the budgets they resolved. */
function WorkersPanel({ report }: { report: BudgetReport }) {
  return (
    <section className="panel">
      <h2>Live workers</h2>
      <DataTable
        headings={[
          "Worker (host:pid)",
          "Queues",
          num("Concurrency"),
          num("Time scale"),
          "Started",
          num("Last publish"),
        ]}
        rows={report.workers}
        empty={report.workersError ?? "No worker process is publishing its budgets — workers are down or not started."}
        label="Live workers"
      >
        {(w) => <WorkerRow key={w.id} worker={w} timeScale={report.timeScale} />}
      </DataTable>
      <p className="small muted">
        Each worker process publishes the budgets it really resolved every 10 s (scaled); a worker that stops publishing
        disappears after three missed publications.
      </p>
    </section>
  );
}

function scaledMs(ms: number, scale: number): number {
  return Math.max(0, Math.round(ms * scale));
}

function RuntimeCell({ row }: { row: BudgetRow }) {
  if (row.status === "not_served") {
    return (
      <>
        <span className="badge idle">no live worker</span>
        <div className="small muted">No live worker consumes this queue: its jobs wait.</div>
      </>
    );
  }
  if (row.status === "drift") {
    return (
      <>
        <span className="badge bad" data-drift>
          drift
        </span>
        {row.drift.map((d) => (
          <div key={d.type} className="small" style={{ color: "var(--bad)", marginTop: "0.3rem" }}>
            <strong>{d.title}:</strong> {d.detail}
          </div>
        ))}
      </>
    );
  }
  return (
    <>
      <span className="badge ok">matches</span>
      <div className="small muted">
        {row.runtime.length === 1
          ? `1 worker uses ${formatBudget(row.runtime[0]!)}`
          : `All ${row.runtime.length} workers use ${formatBudget(row.runtime[0]!)}`}
        : {row.runtime.map((r) => r.worker).join(", ")}
      </div>
    </>
  );
}

function RiskBadge({ risk }: { risk: BudgetRisk }) {
  if (risk.status === "at_risk") return <span className="badge bad">at risk</span>;
  if (risk.status === "ok") return <span className="badge ok">fits</span>;
  if (risk.status === "splits") return <span className="badge ok">splits itself</span>;
  return <span className="badge idle">no data</span>;
}

function RiskRow({ row }: { row: BudgetRow }) {
  const r = row.risk;
  const dash = <span className="muted">—</span>;
  return (
    <tr data-queue={row.queue} data-kind={row.kind}>
      <td>
        <div className="mono">{row.queue}</div>
        <div className="small muted mono">{row.kind}</div>
      </td>
      <td className="num">{formatCount(r.jobs)}</td>
      <td className="num">{r.meanCallMs !== null ? formatDuration(r.meanCallMs) : dash}</td>
      <td className="num">{r.p99CallMs !== null ? formatDuration(r.p99CallMs) : dash}</td>
      <td className="num">{r.callsPerItem !== null ? r.callsPerItem.toFixed(2) : dash}</td>
      <td className="num">{r.largest ? <Estimate estimate={r.largest} noun={row.noun} over={r.atRisk} /> : dash}</td>
      <td className="num">{r.median ? <Estimate estimate={r.median} noun={row.noun} over={r.atRisk} /> : dash}</td>
      <td className="num">
        {formatDuration(r.softMs)}
        <div className="small muted">
          {r.basis === "configuration"
            ? "configured (no live worker)"
            : row.drift.some((d) => d.type === "workers_disagree")
              ? "smallest a live worker uses"
              : "what live workers use"}
        </div>
      </td>
      <td>
        <RiskBadge risk={r} />
      </td>
    </tr>
  );
}

/** "200 rows" over "≈3 h 53 min · 23×", red when above the soft budget of a kind at risk (not when it splits itself). */
function Estimate({ estimate, noun, over }: { estimate: RiskEstimate; noun: string; over: boolean }) {
  const items = Math.round(estimate.items);
  return (
    <>
      <div>
        {formatCount(items)} {noun}
        {items === 1 ? "" : "s"}
      </div>
      <div className="small" style={{ color: over && estimate.ratio > 1 ? "var(--bad)" : "var(--muted)" }}>
        {formatDuration(estimate.expectedMs)} · {formatRatio(estimate.ratio)}
      </div>
    </>
  );
}

function WorkerRow({ worker, timeScale }: { worker: LiveWorker; timeScale: number }) {
  return (
    <tr data-worker={worker.id}>
      <td className="mono">{worker.id}</td>
      <td className="mono">{worker.queues.join(", ")}</td>
      <td className="num">{worker.concurrency}</td>
      <td className="num">
        {worker.timeScale}
        {worker.timeScale !== timeScale ? (
          <div>
            <span className="badge warn" title={`this web process runs with ${timeScale}`}>
              differs from web ({timeScale})
            </span>
          </div>
        ) : null}
      </td>
      <td>{fmtTime(worker.startedAt)}</td>
      <td className="num">{formatAgo(worker.ageMs)}</td>
    </tr>
  );
}
