import Link from "next/link";
import { requirePageViewer } from "@/lib/auth/principal";
import {
  getLimiterReport,
  LIMITER_RANGES,
  limiterQuerySchema,
  type LimiterRange,
  type LimiterReport,
} from "@/lib/reports/ratelimit";
import { formatDuration, formatSeconds } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { fmtOutOf, fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { ChartWithSummary } from "../../components/chart-with-summary";
import { DataTable, num } from "../../components/data-table";
import { JobLink } from "../../components/job-link";
import { ProviderLimits } from "./provider-limits";
import { RescheduleChart } from "./reschedule-chart";
import { TokenLimits } from "./token-limits";
import styles from "./limiter.module.css";

export const dynamic = "force-dynamic";
export const metadata = { title: "Limiter" };

type Search = Record<string, string | string[] | undefined>;

const fmtTokens = (n: number) => (n >= 10 || Number.isInteger(n) ? formatCount(Math.floor(n)) : n.toFixed(2));

function chartLabel(r: LimiterReport): string {
  if (r.totals.reschedules === 0) return `No reschedules in the last ${r.window.rangeLabel}.`;
  const parts = r.series.map((s) => `${s.key}: ${formatCount(s.reschedules)}`).join("; ");
  return `Reschedules per ${r.window.stepLabel}, last ${r.window.rangeLabel}: ${parts}.`;
}

export default async function LimiterPage({ searchParams }: { searchParams: Promise<Search> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/limiter");
  const raw = await searchParams;
  const parsed = limiterQuerySchema.safeParse({ range: typeof raw.range === "string" ? raw.range : undefined });
  const r = await getLimiterReport(parsed.success ? parsed.data : {});
  const overdue = r.delayed.filter((d) => d.overdue).length;
  return (
    <main className="page">
      <PageHead
        title="Limiter"
        description={
          <>
            Marketplace calls take a token from their tenant’s bucket first. A job that would wait longer than 5 s gives
            its worker slot back and waits in
            <em> delayed</em> until the window opens (a reschedule), without spending a retry. As of {fmtTime(r.asOf)}.
            {r.timeScale !== 1 ? ` Times are in production units (time scale ${r.timeScale}).` : ""}
          </>
        }
        actions={
          <nav className={styles.ranges} aria-label="Range">
            {(Object.keys(LIMITER_RANGES) as LimiterRange[]).map((k) => (
              <Link key={k} href={`/limiter?range=${k}`} aria-current={k === r.range ? "page" : undefined}>
                {LIMITER_RANGES[k].label}
              </Link>
            ))}
          </nav>
        }
      />
      {!parsed.success ? (
        <p className="form-error" role="alert">
          The range was not understood; showing the last 24 hours.
        </p>
      ) : null}

      <section className={`grid cols-4 ${styles.grid}`} aria-label="Summary">
        <Stat
          label={`Reschedules, last ${r.window.rangeLabel}`}
          value={formatCount(r.totals.reschedules)}
          testId="reschedules-total"
        />
        <Stat label="Time spent waiting for windows" value={formatDuration(r.totals.waitSeconds * 1000)} />
        <Stat label="Waiting in delayed now" value={formatCount(r.delayed.length)} testId="delayed-count" />
        <Stat label="Past their wake-up time" value={formatCount(overdue)} alert={overdue > 0} />
      </section>

      <ChartWithSummary
        titleId="chart-title"
        title={`Reschedules per ${r.window.stepLabel}, by queue and family`}
        summaryLabel="Reschedules by queue and family"
        summaryTestId="limiter-summary"
        summary={
          r.series.length === 0 ? (
            <p className="small muted" style={{ margin: 0 }}>
              None in this window.
            </p>
          ) : (
            r.series.map((s) => (
              <div className={styles.section} key={s.key}>
                <h3 className="mono">{s.key}</h3>
                <dl className="facts">
                  <dt>reschedules</dt>
                  <dd data-series={s.key}>{formatCount(s.reschedules)}</dd>
                  <dt>time waiting</dt>
                  <dd>{formatDuration(s.waitSeconds * 1000)}</dd>
                  <dt>mean wait</dt>
                  <dd>{formatDuration((s.waitSeconds * 1000) / Math.max(1, s.reschedules))}</dd>
                  <dt>longest wait</dt>
                  <dd>{formatDuration(s.maxWaitSeconds * 1000)}</dd>
                </dl>
              </div>
            ))
          )
        }
      >
        {r.totals.reschedules === 0 ? (
          <div className="empty">No job had to wait for a rate-limit window in the last {r.window.rangeLabel}.</div>
        ) : (
          <RescheduleChart
            points={r.points}
            series={r.series.map((s) => s.key)}
            stepSeconds={r.window.stepSeconds}
            label={chartLabel(r)}
          />
        )}
      </ChartWithSummary>

      <DelayedJobs r={r} />

      <div className={styles.two}>
        <section className="panel" aria-labelledby="tenants-title">
          <h2 id="tenants-title">Tenants that waited longest, last {r.window.rangeLabel}</h2>
          <DataTable
            headings={["Tenant", "Families", num("Reschedules"), num("Time waiting")]}
            rows={r.topTenants}
            empty="No tenant waited."
            testId="top-tenants"
          >
            {(t) => (
              <tr key={t.tenant}>
                <td>{t.tenant}</td>
                <td className={`mono small ${styles.nowrap}`}>{t.families.join(", ")}</td>
                <td className="num">{formatCount(t.reschedules)}</td>
                <td className="num">{formatDuration(t.waitSeconds * 1000)}</td>
              </tr>
            )}
          </DataTable>
        </section>

        <section className="panel" aria-labelledby="buckets-title">
          <h2 id="buckets-title">Buckets per tenant</h2>
          <DataTable
            headings={["Family", num("Capacity"), num("Refill"), "Why"]}
            rows={r.buckets}
            testId="bucket-specs"
          >
            {(b) => (
              <tr key={b.family}>
                <td className={`mono ${styles.nowrap}`}>{b.family}</td>
                <td className={`num ${styles.nowrap}`}>
                  {formatCount(b.capacity)} token{b.capacity === 1 ? "" : "s"}
                </td>
                <td className={`num ${styles.nowrap}`}>
                  {formatCount(b.refillPerWindow)} per {formatSeconds(b.windowSeconds * 1000)}
                </td>
                <td className={`small muted ${styles.why}`}>{b.why}</td>
              </tr>
            )}
          </DataTable>
        </section>
      </div>

      <BucketStates r={r} />

      <ProviderLimits providers={r.providers} asOf={r.asOf} timeScale={r.timeScale} />
      <TokenLimits providers={r.providers} asOf={r.asOf} timeScale={r.timeScale} />
    </main>
  );
}

/** The jobs waiting in delayed for a window, with when each wakes up (and which are overdue). */
function DelayedJobs({ r }: { r: LimiterReport }) {
  return (
    <section className="panel" aria-labelledby="delayed-title">
      <h2 id="delayed-title">Jobs waiting for a window</h2>
      <DataTable
        headings={["Job", "Tenant", "Waiting for", "Wakes up", num("Reschedules"), num("Pages done")]}
        rows={r.delayed}
        empty="No job is waiting in delayed."
        testId="delayed-jobs"
      >
        {(d) => (
          <tr key={d.id}>
            <td>
              <JobLink id={d.id} />
            </td>
            <td>{d.tenant}</td>
            <td className="small">{d.message ?? "—"}</td>
            <td>
              {d.dueInSeconds === null ? (
                "—"
              ) : d.overdue ? (
                <span className="badge bad" title={`queue state: ${d.queueState ?? "unknown"}`}>
                  {formatDuration(-d.dueInSeconds * 1000)} overdue
                </span>
              ) : d.dueInSeconds > 0 ? (
                `in ${formatDuration(d.dueInSeconds * 1000)}`
              ) : (
                "now"
              )}
              <div className="small muted">{fmtTime(d.wakeUpAt)}</div>
            </td>
            <td className="num">{formatCount(d.reschedules)}</td>
            <td className="num">{fmtOutOf(d.processed, d.total)}</td>
          </tr>
        )}
      </DataTable>
      <p className="small muted" style={{ marginBottom: 0 }}>
        A delayed job is never reaped; one still delayed {formatDuration(r.overdueAfterSeconds * 1000)} after its
        wake-up time is flagged here and on the stuck page.
      </p>
    </section>
  );
}

/** Each tenant bucket in use now: its tokens, the next one, and when it is full again. */
function BucketStates({ r }: { r: LimiterReport }) {
  return (
    <section className="panel" aria-labelledby="states-title">
      <h2 id="states-title">Buckets in use now</h2>
      {r.bucketStates === null ? (
        <p className="form-error" role="alert">
          The buckets cannot be read right now (Redis does not answer).
        </p>
      ) : (
        <DataTable
          headings={["Scope", "Tokens", num("Next token"), num("Full again")]}
          rows={r.bucketStates}
          empty="No bucket was used recently: every tenant’s buckets are full."
          testId="bucket-states"
        >
          {(b) => (
            <tr key={b.scope}>
              <td className="mono">{b.scope}</td>
              <td>
                <span className={styles.meter} aria-hidden="true">
                  <span style={{ width: `${Math.min(100, (b.tokens / b.capacity) * 100)}%` }} />
                </span>
                {fmtTokens(b.tokens)} of {formatCount(b.capacity)}
              </td>
              <td className="num">
                {b.nextTokenSeconds <= 0 ? "available" : `in ${formatDuration(b.nextTokenSeconds * 1000)}`}
              </td>
              <td className="num">{b.fullSeconds <= 0 ? "full" : `in ${formatDuration(b.fullSeconds * 1000)}`}</td>
            </tr>
          )}
        </DataTable>
      )}
    </section>
  );
}
