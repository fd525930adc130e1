import { requirePageViewer } from "@/lib/auth/principal";
import { getReservesReport, type ReservesReport } from "@/lib/reports/reserves";
import { formatDuration, formatDurationRounded, formatSeconds } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { ChartWithSummary } from "../../components/chart-with-summary";
import { DataTable, num } from "../../components/data-table";
import { AgeChart, ReclaimedChart } from "./reserves-charts";
import styles from "./reserves.module.css";

export const dynamic = "force-dynamic";
export const metadata = { title: "Reserves" };

const units = (n: number) => `${formatCount(n)} ${n === 1 ? "unit" : "units"}`;
const releases = (n: number) => `${formatCount(n)} ${n === 1 ? "release" : "releases"}`;

export default async function ReservesPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/reserves");
  const r = await getReservesReport();
  const p = r.policy;
  const ageLabel = `Live reserves by age: ${r.live.count} live; worst case of a generation ${formatDuration(p.worstCaseMs)}, sweep window ${formatDuration(p.windowMs)}`;
  return (
    <main className="page">
      <PageHead
        title="Reserves"
        description={
          <>
            Quota units held by running image generations, against the worst case a generation can take and the window
            after which the sweeper may take a silent one back. As of {fmtTime(r.asOf)} — reload for fresh numbers.
            {r.timeScale !== 1 ? ` Ages are in production time (this system runs at time scale ${r.timeScale}).` : ""}
          </>
        }
      />

      {p.problems.length > 0 ? (
        <p className="form-error" role="alert" data-testid="policy-problem">
          The reservation policy is unsafe: {p.problems.join("; ")}. Workers refuse to start with it.
        </p>
      ) : null}

      <Headlines r={r} />

      <ChartWithSummary
        titleId="ages-title"
        title="Live reserves by age"
        summaryLabel="Summary of live reserves"
        summaryTestId="live-summary"
        summaryClassName={styles.summary}
        summary={<LiveSummary r={r} />}
      >
        <AgeChart
          buckets={r.live.buckets.map((b) => ({
            fromMin: b.fromMs / 60_000,
            generate: b.generate,
            dislike: b.dislike,
          }))}
          worstCaseMin={p.worstCaseMs / 60_000}
          windowMin={p.windowMs / 60_000}
          label={ageLabel}
        />
      </ChartWithSummary>

      <ChartWithSummary
        titleId="reclaimed-title"
        title="Reclaimed by the sweeper, last 24 hours"
        summaryLabel="Summary of reclaims and late releases"
        summaryTestId="late-summary"
        summaryClassName={styles.summary}
        summary={<LateSummary r={r} />}
      >
        <ReclaimedChart
          hours={r.reclaimed.hours}
          label={`Reserves reclaimed per hour by kind: ${r.reclaimed.total24h} in the last 24 hours`}
        />
      </ChartWithSummary>

      <PacksTable r={r} />
      <PolicyTable r={r} />
      <LateTable r={r} />
    </main>
  );
}

/** Beside the age chart: what is held now, and when the sweeper may take it back. */
function LiveSummary({ r }: { r: ReservesReport }) {
  const p = r.policy;
  return (
    <>
      <h3>Live now</h3>
      <dl className="facts">
        <dt>live reserves</dt>
        <dd data-stat="live">{units(r.live.count)}</dd>
        <dt>of kind generate</dt>
        <dd>{units(r.live.byKind.generate)}</dd>
        <dt>of kind dislike</dt>
        <dd>{units(r.live.byKind.dislike)}</dd>
        <dt>median age</dt>
        <dd>{r.live.medianMs !== null ? formatDurationRounded(r.live.medianMs) : "—"}</dd>
        <dt>oldest</dt>
        <dd data-stat="oldest">{r.live.oldestMs !== null ? formatDurationRounded(r.live.oldestMs) : "—"}</dd>
        <dt>past worst case, alive</dt>
        <dd>{units(r.live.pastWorstCase)}</dd>
        <dt>silent past lease</dt>
        <dd>{units(r.live.silent)}</dd>
      </dl>
      <p className="small muted">
        Taken back only when older than {formatDuration(p.windowMs)} <strong>and</strong> silent for more than{" "}
        {formatDuration(p.leaseMs)} (heartbeat every {formatSeconds(p.heartbeatMs)}). A slow generation that still
        heartbeats keeps its unit.
      </p>
    </>
  );
}

/** Beside the reclaim chart: what the sweeper took back, and what came back after it. */
function LateSummary({ r }: { r: ReservesReport }) {
  return (
    <>
      <h3>Reclaimed</h3>
      <dl className="facts">
        <dt>last 24 h</dt>
        <dd data-stat="reclaimed24h">{units(r.reclaimed.total24h)}</dd>
        <dt>of kind generate</dt>
        <dd>{units(r.reclaimed.hours.reduce((n, h) => n + h.generate, 0))}</dd>
        <dt>of kind dislike</dt>
        <dd>{units(r.reclaimed.hours.reduce((n, h) => n + h.dislike, 0))}</dd>
        <dt>all time</dt>
        <dd>{units(r.reclaimed.totalAll)}</dd>
      </dl>
      <h3>Late releases</h3>
      <dl className="facts">
        <dt>charged again</dt>
        <dd data-stat="late-charged">{units(r.late.counts.charged)}</dd>
        <dt>owed (debts)</dt>
        <dd data-stat="late-debt">{units(r.late.counts.debt)}</dd>
        <dt>debts still open</dt>
        <dd data-stat="open-debts">{units(r.late.counts.openDebts)}</dd>
        <dt>failed, nothing to charge</dt>
        <dd>{releases(r.late.counts.none)}</dd>
      </dl>
      <p className="small muted">
        A late release is a generation that finished after the sweeper had taken its reserve: it should never happen
        with a safe window.
      </p>
    </>
  );
}

/** What on-call needs first: is the policy safe, is anything held, taken back, late or owed. */
function Headlines({ r }: { r: ReservesReport }) {
  const p = r.policy;
  const safe = p.windowMs >= p.neededMs;
  const late = r.late.counts.charged + r.late.counts.debt + r.late.counts.none;
  const plural = (n: number, one: string, many: string) => `${formatCount(n)} ${n === 1 ? one : many}`;
  return (
    <section className={`grid cols-4 ${styles.headlines}`} aria-label="Summary" data-testid="headlines">
      <Stat
        label={`Sweep window against the worst case × ${p.margin}`}
        value={`${formatDuration(p.windowMs)} ${safe ? "≥" : "<"} ${formatDuration(p.neededMs)}`}
        stat="window-vs-needed"
        alert={!safe}
      >
        <div className="small muted">
          worst case {formatDuration(p.worstCaseMs)} ({formatSeconds(p.worstCaseMs)});{" "}
          {safe ? `${formatSeconds(p.windowMs - p.neededMs)} to spare` : "too short: workers refuse to start"}
        </div>
      </Stat>
      <Stat
        label="Units held by running generations"
        value={plural(r.live.count, "unit", "units")}
        alert={r.live.silent > 0}
      >
        <div className="small muted">
          {plural(r.live.silent, "reserve", "reserves")} silent past the {formatDuration(p.leaseMs)} lease; oldest{" "}
          {r.live.oldestMs !== null ? formatDurationRounded(r.live.oldestMs) : "—"}
        </div>
      </Stat>
      <Stat label="Reclaimed by the sweeper, last 24 h" value={plural(r.reclaimed.total24h, "unit", "units")}>
        <div className="small muted">refunded to their packs; {formatCount(r.reclaimed.totalAll)} all time</div>
      </Stat>
      <Stat
        label="Late releases (should be none)"
        value={plural(late, "release", "releases")}
        stat="late-total"
        alert={late > 0 || r.late.counts.openDebts > 0}
      >
        <div className="small muted">
          {plural(r.late.counts.openDebts, "open debt", "open debts")} (units owed by empty packs)
        </div>
      </Stat>
    </section>
  );
}

function PacksTable({ r }: { r: ReservesReport }) {
  const { rows, count, totals, empty } = r.packs;
  return (
    <section className="panel" aria-labelledby="packs-title">
      <h2 id="packs-title">Packs</h2>
      <p className="small muted" data-testid="packs-summary">
        {count === 0
          ? "No tenant has a pack yet: grant one with npm run packs -- grant <tenant> <units>, or POST /api/packs."
          : `${formatCount(count)} ${count === 1 ? "pack" : "packs"}: ${formatCount(totals.remaining)} of ${formatCount(totals.size)} units remaining, ${formatCount(totals.live)} held by running generations, ${formatCount(totals.spent)} spent, ${formatCount(totals.openDebts)} open ${totals.openDebts === 1 ? "debt" : "debts"}; ${formatCount(empty)} ${empty === 1 ? "pack is" : "packs are"} empty.${count > rows.length ? ` The ${rows.length} changed last are listed.` : ""}`}
      </p>
      {rows.length > 0 ? (
        <DataTable
          headings={[
            "tenant",
            num("size (units)"),
            num("remaining (units)"),
            num("running (units)"),
            num("spent (units)"),
            num("open debts (units)"),
            "last change",
          ]}
          rows={rows}
          className={styles.numbers}
          testId="packs-table"
        >
          {(p) => (
            <tr key={p.tenant} data-tenant={p.tenant}>
              <td>{p.tenant}</td>
              <td className="num">{formatCount(p.size)}</td>
              <td className="num" data-stat="remaining">
                {p.remaining <= 0 ? <span className="badge bad">0 — empty</span> : formatCount(p.remaining)}
              </td>
              <td className="num" data-stat="running">
                {formatCount(p.live)}
              </td>
              <td className="num" data-stat="spent">
                {formatCount(p.spent)}
              </td>
              <td className="num" data-stat="debts">
                {p.openDebts > 0 ? <span className="badge bad">{formatCount(p.openDebts)}</span> : "0"}
              </td>
              <td>{fmtTime(p.updatedAt)}</td>
            </tr>
          )}
        </DataTable>
      ) : null}
    </section>
  );
}

function PolicyTable({ r }: { r: ReservesReport }) {
  const p = r.policy;
  return (
    <section className="panel" aria-labelledby="policy-title">
      <h2 id="policy-title">The worst case, from the constants the generation uses</h2>
      <DataTable
        headings={["step", num("per attempt"), num("× attempts"), num("× times per generation"), num("= total"), "why"]}
        rows={p.terms}
        className={styles.numbers}
        testId="policy-table"
        footer={
          <>
            <tr className={styles.total}>
              <td colSpan={4}>worst case of one generation</td>
              <td className="num" data-stat="worst-case">
                {formatSeconds(p.worstCaseMs)}
              </td>
              <td className="small">{formatDuration(p.worstCaseMs)}</td>
            </tr>
            <tr>
              <td colSpan={4}>× margin {p.margin}: the shortest safe sweep window</td>
              <td className="num">{formatSeconds(p.neededMs)}</td>
              <td className="small">{formatDuration(p.neededMs)}</td>
            </tr>
            <tr className={styles.total}>
              <td colSpan={4}>sweep window ({p.windowSource})</td>
              <td className="num" data-stat="window">
                {formatSeconds(p.windowMs)}
              </td>
              <td className="small">
                {formatDuration(p.windowMs)}: {p.windowWhy}.{" "}
                {p.windowMs >= p.neededMs ? `${formatSeconds(p.windowMs - p.neededMs)} to spare.` : "TOO SHORT."}
              </td>
            </tr>
          </>
        }
      >
        {(t) => (
          <tr key={t.name}>
            <td>{t.name}</td>
            <td className="num">{formatSeconds(t.eachMs)}</td>
            <td className="num">× {t.attempts}</td>
            <td className="num">× {t.times}</td>
            <td className="num">= {formatSeconds(t.totalMs)}</td>
            <td className="small">{t.why}</td>
          </tr>
        )}
      </DataTable>
    </section>
  );
}

function LateTable({ r }: { r: ReservesReport }) {
  return (
    <section className="panel" aria-labelledby="late-title">
      <h2 id="late-title">Late releases and debts</h2>
      {r.late.recent.length === 0 ? (
        <div className="empty" data-testid="late-empty">
          <p>No release has ever found its reserve swept.</p>
        </div>
      ) : (
        <DataTable
          headings={["released", "tenant", "kind", "ad", "outcome", "resolution", num("held")]}
          rows={r.late.recent}
          className={styles.numbers}
          testId="late-table"
        >
          {(l) => (
            <tr key={l.reserveId}>
              <td>{fmtTime(l.releasedAt)}</td>
              <td>{l.tenant}</td>
              <td>{l.kind}</td>
              <td className="small">{l.adId}</td>
              <td>{l.outcome}</td>
              <td>
                <span
                  className={`badge ${l.resolution === "debt" ? (l.debtSettledAt ? "idle" : "bad") : l.resolution === "charged" ? "warn" : "idle"}`}
                >
                  {l.resolution === "debt"
                    ? l.debtSettledAt
                      ? "debt, settled"
                      : "debt, open"
                    : l.resolution === "charged"
                      ? "charged again"
                      : "nothing to charge"}
                </span>
              </td>
              <td className="num">{formatDurationRounded(l.heldMs)}</td>
            </tr>
          )}
        </DataTable>
      )}
    </section>
  );
}
