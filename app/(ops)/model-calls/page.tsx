import Link from "next/link";
import { getCallAllowance, type CallAllowance } from "@/lib/modelcalls/allowance";
import type { LatencySummary, PercentileEstimate } from "@/lib/modelcalls/buckets";
import {
  HISTOGRAM_TYPES,
  bucketCallsQuery,
  LATENCY_RANGES,
  getLatencyHistogram,
  latencyHistogramQuerySchema,
  type LatencyHistogram,
} from "@/lib/modelcalls/queries";
import { formatCount } from "@/lib/format/number";
import { countLabel } from "@/lib/jobs/messages";
import { fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { ChartWithSummary } from "../../components/chart-with-summary";
import { FilterForm } from "../../components/filter-form";
import { SelectField } from "../../components/field";
import { formatDuration, formatDurationRounded, formatEstimate } from "@/lib/format/duration";
import { RANGE_LABEL } from "./format";
import { LatencyChart, type ChartBucket } from "./latency-chart";
import { TokenUsageSection } from "./token-usage";
import { AnswerReuseSection } from "./answer-reuse";
import { ProvidersSection } from "./providers";
import { hasRole } from "@/lib/auth/roles";
import styles from "./model-calls.module.css";
import { requirePageViewer } from "@/lib/auth/principal";
import { env } from "@/lib/env";
import { histogramInProductionTime } from "@/lib/reports/production-time";

export const dynamic = "force-dynamic";
export const metadata = { title: "Model calls" };

type Search = Record<string, string | string[] | undefined>;

const TYPE_LABEL = {
  model: "model calls",
  ocr: "OCR calls",
  tool: "tool calls",
  item: "whole items (dispatch to commit)",
} as const;

export default async function ModelCallsPage({ searchParams }: { searchParams: Promise<Search> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const canClear = hasRole(await requirePageViewer("/model-calls"), "operator");
  const raw = Object.fromEntries(
    Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== ""),
  ) as Record<string, string>;
  const parsed = latencyHistogramQuerySchema.safeParse(raw);
  const query = parsed.success ? parsed.data : latencyHistogramQuerySchema.parse({});
  // Recorded latencies in production time, the unit of the call allowance they are drawn against.
  const timeScale = env().BOUNDED_TIME_SCALE;
  const [h, allowance] = await Promise.all([
    getLatencyHistogram(query).then((recorded) => histogramInProductionTime(recorded, timeScale)),
    query.kind ? getCallAllowance(query.kind, query.queue) : Promise.resolve(null),
  ]);
  const what = TYPE_LABEL[h.type];
  // Tool calls happen between model (or OCR) calls; beside whole items they would compare unlike things.
  const showsTools = h.type === "model" || h.type === "ocr";
  const chartBuckets: ChartBucket[] = h.buckets.map((b) => ({
    bucket: b.bucket,
    lowerMs: b.lowerMs,
    upperMs: b.upperMs,
    ...b.byOutcome,
    href: b.count > 0 ? callsHref(h, b.bucket) : null,
  }));

  return (
    <main className="page">
      <PageHead
        title="Model calls"
        description={
          <>
            How long {what} took, in production time, counted per latency bucket (six per decade) and per hour. As of{" "}
            {fmtTime(h.window.to)}.
          </>
        }
      />

      <Filters h={h} raw={raw} />
      {!parsed.success ? (
        <p className="form-error" role="alert">
          Some filters were not understood and were ignored:{" "}
          {parsed.error.issues.map((i) => i.path.join(".")).join(", ")}.
        </p>
      ) : null}
      {h.window.note ? <p className={`small muted ${styles.note}`}>{h.window.note}</p> : null}

      {h.summary.total === 0 ? (
        <section className="panel">
          <div className="empty" data-testid="empty">
            <p>
              <strong>
                No {what} in the last {RANGE_LABEL[h.range]}
                {h.filters.queue || h.filters.kind || h.filters.model ? " that match these filters" : ""}.
              </strong>
            </p>
            <p>
              Choose a longer range
              {h.filters.queue || h.filters.kind || h.filters.model ? (
                <>
                  {" "}
                  or <Link href="/model-calls">clear the filters</Link>
                </>
              ) : null}
              . Calls are recorded as workers make them: <Link href="/upload">upload a CSV</Link> to start an import,
              and its model calls appear here within seconds.
            </p>
            {showsTools && h.tools.total > 0 ? (
              <p className="small">
                There were {formatCount(h.tools.total)} tool calls in this window, summarised below.
              </p>
            ) : null}
          </div>
          {showsTools && h.tools.total > 0 ? (
            <div className={styles.summary}>
              <SummaryList title="Tool calls beside them" s={h.tools} testId="tool-summary" />
            </div>
          ) : null}
        </section>
      ) : (
        <ChartWithSummary
          titleId="chart-title"
          title={`Latency of ${what}, last ${RANGE_LABEL[h.range]}`}
          summaryLabel="Summary"
          summaryTestId="summary"
          summaryClassName={styles.summary}
          summary={
            <>
              <SummaryList title={capitalise(what)} s={h.summary} testId="model-summary" />
              {showsTools ? <SummaryList title="Tool calls beside them" s={h.tools} testId="tool-summary" /> : null}
              <p className={`small muted ${styles.section}`}>
                Percentiles are read off the bucket counts: the bucket is exact, the value inside it interpolated
                (within ×1.47); max and mean are exact.
              </p>
            </>
          }
        >
          <LatencyChart
            buckets={chartBuckets}
            allowanceMs={allowance?.allowanceMs ?? null}
            timeScale={timeScale}
            label={chartLabel(h)}
          />
          <AllowanceNote kind={query.kind} allowance={allowance} />
          <BucketList buckets={chartBuckets} />
        </ChartWithSummary>
      )}
      {h.type === "model" ? (
        <>
          <ProvidersSection />
          <TokenUsageSection query={query} range={h.range} />
          <AnswerReuseSection window={h.window} range={h.range} kind={query.kind} canClear={canClear} />
        </>
      ) : null}
    </main>
  );
}

function Filters({ h, raw }: { h: LatencyHistogram; raw: Record<string, string> }) {
  const withCurrent = (values: string[], current: string | null) =>
    current && !values.includes(current) ? [current, ...values] : values;
  return (
    <FilterForm clearHref="/model-calls" submitLabel="Show" label="Filters">
      <SelectField
        label="Range"
        name="range"
        defaultValue={h.range}
        options={LATENCY_RANGES.map((r) => ({ value: r, label: `last ${RANGE_LABEL[r]}` }))}
      />
      <SelectField
        label="Calls"
        name="type"
        defaultValue={h.type}
        options={HISTOGRAM_TYPES.map((t) => ({ value: t, label: TYPE_LABEL[t] }))}
      />
      <SelectField
        label="Queue"
        name="queue"
        any="any"
        defaultValue={raw.queue ?? ""}
        options={withCurrent(h.options.queues, h.filters.queue)}
      />
      <SelectField
        label="Kind"
        name="kind"
        any="any"
        defaultValue={raw.kind ?? ""}
        options={withCurrent(h.options.kinds, h.filters.kind)}
      />
      <SelectField
        label={h.type === "tool" ? "Tool" : "Model"}
        name="model"
        any="any"
        defaultValue={raw.model ?? ""}
        options={withCurrent(h.options.models, h.filters.model)}
      />
    </FilterForm>
  );
}

function pct(e: PercentileEstimate | null): string {
  // An estimate from the histogram's buckets: the "≈" is said here, once.
  return e ? formatEstimate(e.ms) : "—";
}

function SummaryList({ title, s, testId }: { title: string; s: LatencySummary; testId: string }) {
  return (
    <div className={styles.section} data-testid={testId}>
      <h3>{title}</h3>
      {s.total === 0 ? (
        <p className="small muted">None in this window.</p>
      ) : (
        <>
          <dl className="facts">
            <dt>p50</dt>
            <dd data-stat="p50">{pct(s.p50)}</dd>
            <dt>p90</dt>
            <dd data-stat="p90">{pct(s.p90)}</dd>
            <dt>p99</dt>
            <dd data-stat="p99">{pct(s.p99)}</dd>
            <dt>max</dt>
            <dd data-stat="max">{s.maxMs !== null ? formatDuration(s.maxMs) : "—"}</dd>
            <dt>mean</dt>
            <dd data-stat="mean">{s.meanMs !== null ? formatDuration(s.meanMs) : "—"}</dd>
            <dt>calls</dt>
            <dd data-stat="total">{formatCount(s.total)}</dd>
          </dl>
          <ul className={styles.outcomes} aria-label="Calls per outcome">
            <li className="badge ok" data-outcome="ok">
              {formatCount(s.byOutcome.ok)} ok
            </li>
            <li className={`badge ${s.byOutcome.error > 0 ? "bad" : "idle"}`} data-outcome="error">
              {formatCount(s.byOutcome.error)} error
            </li>
            <li className={`badge ${s.byOutcome.aborted > 0 ? "warn" : "idle"}`} data-outcome="aborted">
              {formatCount(s.byOutcome.aborted)} aborted
            </li>
            {s.byOutcome.superseded > 0 ? (
              <li className="badge idle" data-outcome="superseded">
                {formatCount(s.byOutcome.superseded)} superseded
              </li>
            ) : null}
          </ul>
          {s.byOutcome.superseded > 0 ? (
            <p className="small muted" data-testid="superseded-note">
              Superseded: a request that went unanswered was sent twice, and the copy that had not answered was
              cancelled when the other one did. Not a failure; its time is how long it ran before it was cancelled.
            </p>
          ) : null}
        </>
      )}
    </div>
  );
}

function AllowanceNote({ kind, allowance: a }: { kind: string | undefined; allowance: CallAllowance | null }) {
  if (!kind) {
    return (
      <p className={`small muted ${styles.budget}`}>Choose a kind to see its call allowance as a line on the chart.</p>
    );
  }
  if (!a) {
    return (
      <p className={`small muted ${styles.budget}`}>
        No call allowance for <span className="mono">{kind}</span>: no job of this kind with a known size in the last 7
        days.
      </p>
    );
  }
  const rounds = a.rounds === 1 ? "in one round" : `in ${formatCount(a.rounds)} rounds, one after another`;
  return (
    <p className={`small ${styles.budget}`} data-testid="call-allowance">
      <strong>Call allowance {formatDuration(a.allowanceMs)}</strong> (dashed line): what one call may take on average
      for a typical job to finish inside the soft budget of <span className="mono">{a.queue}</span>,{" "}
      {formatDuration(a.softMs)}. A typical job has {countLabel(Math.round(a.medianItems), "item")} (median of{" "}
      {formatCount(a.jobs)} {a.jobs === 1 ? "job" : "jobs"} of the last 7 days),{" "}
      {a.itemsPerCall === 1 ? "one a call" : `${formatCount(a.itemsPerCall)} to a call`}: {formatCount(a.callsPerJob)}{" "}
      {a.callsPerJob === 1 ? "call" : "calls"}, {formatCount(a.callsAtOnce)} at once, so {rounds}. Calls right of the
      line, if typical, make typical jobs miss their budget.
    </p>
  );
}

/** The list of the calls one bar counts, or null when they are not kept one by one (whole items). */
function callsHref(h: LatencyHistogram, bucket: number): string | null {
  const query = bucketCallsQuery(h, bucket);
  return query ? `/model-calls/calls?${new URLSearchParams(query)}` : null;
}

/** The bars as text, each linking to its calls: for keyboards and screen readers, and for exact counts. */
function BucketList({ buckets }: { buckets: ChartBucket[] }) {
  const filled = buckets.filter((b) => b.ok + b.error + b.aborted > 0);
  if (filled.length === 0 || filled.every((b) => b.href === null)) return null;
  return (
    <details className={`small ${styles.budget}`} data-testid="bucket-list">
      <summary>Calls per latency bucket ({filled.length} with calls): open a bucket’s calls</summary>
      <ul className={styles.buckets}>
        {filled.map((b) => {
          const total = b.ok + b.error + b.aborted;
          const range =
            b.bucket === 0
              ? `under ${formatDurationRounded(b.upperMs ?? 0)}`
              : b.upperMs === null
                ? `${formatDurationRounded(b.lowerMs)} and more`
                : `${formatDurationRounded(b.lowerMs)} – ${formatDurationRounded(b.upperMs)}`;
          return (
            <li key={b.bucket}>
              {range}:{" "}
              {b.href ? (
                <Link href={b.href} data-bucket={b.bucket}>
                  {formatCount(total)} {total === 1 ? "call" : "calls"}
                </Link>
              ) : (
                `${formatCount(total)} ${total === 1 ? "call" : "calls"}`
              )}
              {b.error > 0 ? <span className="muted">, {formatCount(b.error)} error</span> : null}
            </li>
          );
        })}
      </ul>
    </details>
  );
}

function chartLabel(h: LatencyHistogram): string {
  const s = h.summary;
  return `Histogram of ${formatCount(s.total)} ${TYPE_LABEL[h.type]} by latency: p50 ${pct(s.p50)}, p99 ${pct(s.p99)}, max ${s.maxMs !== null ? formatDuration(s.maxMs) : "unknown"}.`;
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
