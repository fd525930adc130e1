import Link from "next/link";
import { getBudgetReport, type BudgetReport } from "@/lib/reports/budgets";
import { countLabel } from "@/lib/jobs/messages";
import { countJobsByStatus, listJobs, type JobListItem } from "@/lib/job-views/queries";
import { countRecentFailures, failuresCard, type RecentFailures } from "@/lib/reports/recent-failures";
import { getStuckOverview, stuckHeadline, type StuckHeadline } from "@/lib/reports/stuck-groups";
import { JOB_STATUSES, STATUS_LABEL, type JobStatus } from "@/lib/core/job-statuses";
import { histogramInProductionTime } from "@/lib/reports/production-time";
import { getLatencyHistogram, type LatencyHistogram } from "@/lib/modelcalls/queries";
import { JobsTable } from "../../components/jobs-table";
import { formatCount } from "@/lib/format/number";
import { formatDurationRounded } from "@/lib/format/duration";
import { requirePageViewer } from "@/lib/auth/principal";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { OutsideServicesBanner } from "./outside-services-banner";
import { failedCallCount } from "@/lib/core/call-outcomes";

export const dynamic = "force-dynamic";
export const metadata = { title: "Overview" };

const ATTENTION = new Set(["timed_out", "killed", "failed", "abandoned"]);

/** What the stuck page's headline says, in one sentence: open jobs stuck, and ended jobs awaiting a person. */
function stuckSentence({ stuckNow, awaitingOperator }: StuckHeadline): string {
  if (stuckNow === 0 && awaitingOperator === 0) return "Nothing stuck, and no job waits for a person.";
  const parts = [
    stuckNow > 0 ? `${formatCount(stuckNow)} stuck` : null,
    awaitingOperator > 0 ? `${countLabel(awaitingOperator, "job")} awaiting an operator` : null,
  ].filter(Boolean);
  return `${parts.join("; ")}.`;
}

/** The headline of each area; every number links to the page that explains it. */
export default async function OverviewPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/");
  const [counts, recent, stuck, calls, budgets, failures] = await Promise.all([
    countJobsByStatus(),
    listJobs({ limit: 10 }),
    getStuckOverview().then(stuckHeadline),
    getLatencyHistogram({ range: "24h" }).then((recorded) => histogramInProductionTime(recorded)),
    getBudgetReport(),
    countRecentFailures(),
  ]);
  const attention = JOB_STATUSES.filter((s) => ATTENTION.has(s)).reduce((n, s) => n + counts[s], 0);
  return (
    <main className="page">
      <PageHead
        title="Overview"
        description={
          <>
            {stuckSentence(stuck)}{" "}
            {attention > 0
              ? `${countLabel(attention, "job")} ended badly in the last 24 h (timed out, stopped, failed or abandoned).`
              : "No job ended badly in the last 24 h."}
          </>
        }
      />

      <OutsideServicesBanner />

      <Headlines counts={counts} stuck={stuck} calls={calls} budgets={budgets} failures={failures} />
      <JobsByStatus counts={counts} />
      <LatestJobs jobs={recent.jobs} />
    </main>
  );
}

/** The headlines: stuck jobs, recent failures, model-call latency, budgets and what runs now. */
function Headlines({
  counts,
  stuck,
  calls,
  budgets,
  failures,
}: {
  counts: Record<JobStatus, number>;
  stuck: StuckHeadline;
  calls: LatencyHistogram;
  budgets: BudgetReport;
  failures: RecentFailures;
}) {
  const drifting = budgets.rows.filter((r) => r.status === "drift").length;
  const atRisk = budgets.rows.filter((r) => r.risk.atRisk).length;
  return (
    <section className="grid cols-4" aria-label="Headlines">
      <StuckStat stuck={stuck} />
      <FailuresStat failures={failures} />
      <CallsStat summary={calls.summary} />
      <Stat
        href="/budgets"
        label="Budgets: drifting / at risk"
        value={`${formatCount(drifting)} / ${formatCount(atRisk)}`}
        alert={drifting > 0 || atRisk > 0 || budgets.workers.length === 0}
      >
        <div className="label">
          {budgets.workers.length === 0
            ? "no worker is running"
            : `${formatCount(budgets.workers.length)} live worker process${budgets.workers.length === 1 ? "" : "es"}`}
        </div>
      </Stat>
      <Stat
        href="/jobs?status=running"
        label="Running / queued"
        value={`${formatCount(counts.running)} / ${formatCount(counts.queued)}`}
      />
    </section>
  );
}

/** Open jobs stuck and ended jobs awaiting an operator, with what holds them. */
function StuckStat({ stuck }: { stuck: StuckHeadline }) {
  return (
    <Stat
      href="/stuck"
      label="Stuck / awaiting an operator"
      value={`${formatCount(stuck.stuckNow)} / ${formatCount(stuck.awaitingOperator)}`}
      alert={stuck.stuckNow + stuck.awaitingOperator > 0}
      testId="overview-stuck"
    >
      <div className="label">
        {stuck.awaitingOperator > 0
          ? `${countLabel(stuck.awaitingOperator, "ended job")} only a person continues`
          : stuck.stuckNow > 0
            ? stuck.openCauses
            : "no job is stuck or waits for a person"}
      </div>
    </Stat>
  );
}

/** Items failed in the last hour, and the jobs that ended badly in it (`failuresCard`). */
function FailuresStat({ failures }: { failures: RecentFailures }) {
  const card = failuresCard(failures);
  return (
    <Stat
      href={card.href}
      label="Failed, last hour"
      value={countLabel(failures.items, "item")}
      alert={card.alert}
      testId="recent-failures"
    >
      <div className="label">{card.note}</div>
    </Stat>
  );
}

/** The model calls' p50 and p99 over 24 h, and how many failed. */
function CallsStat({ summary: s }: { summary: LatencyHistogram["summary"] }) {
  const failedCalls = failedCallCount(s.byOutcome);
  return (
    <Stat
      href="/model-calls"
      label="Model calls, 24 h: p50 / p99"
      value={s.p50 && s.p99 ? `${formatDurationRounded(s.p50.ms)} / ${formatDurationRounded(s.p99.ms)}` : "—"}
    >
      <div className="label">
        {formatCount(s.total)} calls{failedCalls ? `, ${formatCount(failedCalls)} failed or aborted` : ""}
      </div>
    </Stat>
  );
}

/** A count per status, each linking to its list, with where the queues are shown. */
function JobsByStatus({ counts }: { counts: Record<JobStatus, number> }) {
  return (
    <>
      <h2 style={{ marginTop: "1.5rem" }}>Jobs by status</h2>
      <p className="muted">
        Waiting and running now; finished in the last 24 hours. Each links to the full list. Queue by queue — depth,
        oldest wait, worker slots, pauses: <Link href="/queues">Queues →</Link>
      </p>
      <section className="grid cols-4" aria-label="Jobs by status">
        {JOB_STATUSES.map((st) => (
          <Stat
            key={st}
            href={`/jobs?status=${st}`}
            label={STATUS_LABEL[st]}
            value={formatCount(counts[st])}
            alert={ATTENTION.has(st) && counts[st] > 0}
          />
        ))}
      </section>
    </>
  );
}

/** The ten newest jobs, and the way to all of them. */
function LatestJobs({ jobs }: { jobs: JobListItem[] }) {
  return (
    <section className="panel" style={{ marginTop: "1.25rem" }}>
      <h2>Latest jobs</h2>
      <JobsTable jobs={jobs} />
      <p className="small">
        <Link href="/jobs">All jobs →</Link>
      </p>
    </section>
  );
}
