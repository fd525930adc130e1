import Link from "next/link";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { formatDuration, formatDurationRounded, formatEstimate } from "@/lib/format/duration";
import {
  getQueuesOverview,
  RECENT_MINUTES,
  THROUGHPUT_MINUTES,
  type QueueOverview,
  type QueuesOverview,
} from "@/lib/queues/overview";
import { BLOCKED_BY_LABEL, mostCommonCauses, QUEUE_CAUSE_SAMPLE, type QueueCause } from "@/lib/diagnosis/blocked-by";
import { DataTable, num } from "../../components/data-table";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { OutsideServicesBanner } from "../(overview)/outside-services-banner";
import { PauseForm } from "./pause-form";
import { ThroughputChart } from "./throughput-chart";
import styles from "./queues.module.css";
import { formatPerMinute } from "@/lib/format/rate";

export const dynamic = "force-dynamic";
export const metadata = { title: "Queues" };

function drainText(q: QueueOverview): string {
  switch (q.drain.state) {
    case "empty":
      return "nothing waiting";
    case "paused":
      return "paused";
    case "not-draining":
      return "not draining";
    case "draining":
      return formatEstimate(q.drain.seconds * 1000);
  }
}

/**
 * The oldest waiting job against the queue's smallest soft budget: past it, the backlog alone
 * makes jobs late. A paused queue's backlog is on purpose, as in the alert.
 */
const overBudget = (q: QueueOverview) =>
  q.paused === null && q.oldestWaitingSeconds !== null && q.oldestWaitingSeconds > q.softBudgetSeconds;

function throughputLabel(q: QueueOverview): string {
  const t = q.throughput;
  if (t.lastHour === 0) return `${q.queue}: no job completed in the last hour.`;
  return `${q.queue}: ${formatCount(t.lastHour)} completed in the last hour, at most ${formatCount(Math.max(...t.perMinute))} in one minute; ${formatPerMinute(t.recentPerMinute)} over the last ${RECENT_MINUTES} minutes.`;
}

/**
 * Why this queue's jobs wait, right now: the most common cause among its longest-waiting queued or
 * delayed jobs (a sample of QUEUE_CAUSE_SAMPLE, not every job: lib/diagnosis/blocked-by.ts), and one
 * of those jobs' sentences.
 */
function WaitCause({ cause }: { cause: QueueCause | undefined }) {
  if (!cause || cause.type === null) return null;
  const sample =
    cause.waiting > cause.sampled
      ? `${formatCount(cause.count)} of the ${formatCount(cause.sampled)} longest-waiting of ${formatCount(cause.waiting)} waiting jobs`
      : `${formatCount(cause.count)} of ${formatCount(cause.waiting)} waiting job${cause.waiting === 1 ? "" : "s"}`;
  return (
    <p
      className="small"
      style={{ margin: "0.25rem 0 0" }}
      data-testid={`queue-${cause.queue}-cause`}
      data-type={cause.type}
    >
      <strong>Jobs wait for: {BLOCKED_BY_LABEL[cause.type]}</strong> ({sample}).
      {/* A paused queue's line above already says who paused it and since when. */}
      {cause.type === "queue_paused" ? null : <span className="muted"> {cause.message}</span>}
    </p>
  );
}

/** Each queue now: what it holds, how long its oldest job waited, its worker slots and throughput, and its pause. */
export default async function QueuesPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/queues");
  const isOperator = hasRole(principal, "operator");
  const [o, causes] = await Promise.all([getQueuesOverview(), mostCommonCauses()]);
  const causeOf = new Map<string, QueueCause>(causes.map((c) => [c.queue, c]));

  return (
    <main className="page">
      <PageHead
        title="Queues"
        description={
          <>
            What each queue holds now (BullMQ’s counts), how long its oldest queued job has waited and what completes
            per minute (the job table), and the worker slots of the live workers. As of {fmtTime(o.asOf)}.
            {o.timeScale !== 1
              ? ` Ages and drain times in production units (time scale ${o.timeScale}); throughput per minute of real time.`
              : ""}
          </>
        }
      />

      <OutsideServicesBanner />

      <Summary o={o} />

      <QueuesNow o={o} />

      <div className={styles.cards}>
        {o.queues.map((q) => (
          <QueueCard key={q.queue} q={q} cause={causeOf.get(q.queue)} canAct={isOperator} />
        ))}
      </div>
    </main>
  );
}

/** All queues together: jobs waiting, worker slots busy, the oldest wait (and queues past budget), pauses. */
function Summary({ o }: { o: QueuesOverview }) {
  const total = (f: (q: QueueOverview) => number) => o.queues.reduce((n, q) => n + f(q), 0);
  const waiting = total((q) => q.counts.waiting);
  const busy = total((q) => q.slots.busy);
  const slots = total((q) => q.slots.total);
  const late = o.queues.filter(overBudget);
  const paused = o.queues.filter((q) => q.paused);
  const oldest = o.queues.reduce<QueueOverview | null>(
    (best, q) =>
      q.oldestWaitingSeconds !== null && (best === null || q.oldestWaitingSeconds > best.oldestWaitingSeconds!)
        ? q
        : best,
    null,
  );
  return (
    <section className={`grid cols-4 ${styles.grid}`} aria-label="Summary">
      <Stat label="Waiting, all queues" value={formatCount(waiting)} testId="waiting-total" />
      <Stat
        label="Worker slots busy / total"
        value={`${formatCount(busy)} / ${formatCount(slots)}`}
        alert={o.workers === 0}
      >
        <div className="label">
          {o.workers === 0
            ? "no worker is running"
            : `${formatCount(o.workers)} live worker process${o.workers === 1 ? "" : "es"}`}
        </div>
      </Stat>
      <Stat
        label="Oldest waiting"
        value={oldest ? formatDurationRounded(oldest.oldestWaitingSeconds! * 1000) : "—"}
        alert={late.length > 0}
      >
        <div className="label">
          {oldest ? `on ${oldest.queue}` : "nothing queued"}
          {late.length > 0 ? ` · ${formatCount(late.length)} queue${late.length === 1 ? "" : "s"} past budget` : ""}
        </div>
      </Stat>
      <Stat label="Paused queues" value={formatCount(paused.length)} alert={paused.length > 0} testId="paused-total">
        <div className="label">{paused.length > 0 ? paused.map((q) => q.queue).join(", ") : "all running"}</div>
      </Stat>
    </section>
  );
}

/** The table of queues, one row each, and how its columns are measured. */
function QueuesNow({ o }: { o: QueuesOverview }) {
  return (
    <section className="panel" aria-labelledby="now-title">
      <h2 id="now-title">Queues now</h2>
      <DataTable
        headings={[
          "Queue",
          num("Waiting"),
          num("Active"),
          num("Delayed"),
          num("Failed"),
          num("Oldest waiting / budget"),
          num("Slots busy / total"),
          num("Drain"),
        ]}
        rows={o.queues}
        testId="queues-table"
        label="Queues now"
        className={styles.table}
      >
        {(q) => <QueueRow key={q.queue} q={q} />}
      </DataTable>
      <p className="small muted" style={{ marginBottom: 0 }}>
        Waiting counts jobs ready for a worker (a paused queue’s included); failed is the queue’s failed set of the last
        7 days — why each ended is on <Link href="/jobs">Jobs</Link>. The oldest wait is measured from when a job last
        entered the queue, against the smallest soft budget of the queue’s kinds. Drain divides the waiting jobs by what
        completed per minute over the last {RECENT_MINUTES} minutes. What jobs wait for (on each queue’s card) is the
        most common cause among its {QUEUE_CAUSE_SAMPLE} longest-waiting jobs, read from the live state; each job’s page
        says its own.
      </p>
    </section>
  );
}

/** A queue's row: its pause, its counts, its oldest wait against its budget, its slots and its drain time. */
function QueueRow({ q }: { q: QueueOverview }) {
  return (
    <tr data-queue={q.queue}>
      <td>
        <span className="mono">{q.queue}</span>{" "}
        {q.paused ? (
          <span className="badge warn" data-testid={`queue-${q.queue}-paused`}>
            paused
          </span>
        ) : null}
        {q.paused ? (
          <div className="small muted">
            Paused by {q.paused.by} since {fmtTime(q.paused.since)}
          </div>
        ) : null}
      </td>
      <td className="num" data-testid={`queue-${q.queue}-waiting`}>
        {formatCount(q.counts.waiting)}
      </td>
      <td className="num">{formatCount(q.counts.active)}</td>
      <td className="num">{formatCount(q.counts.delayed)}</td>
      <td className="num">{formatCount(q.counts.failed)}</td>
      <td className={`num ${styles.nowrap}`}>
        {q.oldestWaitingSeconds === null ? (
          "—"
        ) : overBudget(q) ? (
          <span className="badge bad">{formatDurationRounded(q.oldestWaitingSeconds * 1000)}</span>
        ) : (
          formatDurationRounded(q.oldestWaitingSeconds * 1000)
        )}
        <div className="small muted">budget {formatDuration(q.softBudgetSeconds * 1000)}</div>
      </td>
      <td className="num">
        {formatCount(q.slots.busy)} / {formatCount(q.slots.total)}
        <div className="small muted">
          {formatCount(q.slots.workers)} worker{q.slots.workers === 1 ? "" : "s"}
        </div>
      </td>
      <td className={`num ${styles.nowrap}`} data-testid={`queue-${q.queue}-drain`}>
        {q.drain.state === "not-draining" ? <span className="badge bad">not draining</span> : drainText(q)}
      </td>
    </tr>
  );
}

/** One queue's card: its state and what its jobs wait for, the pause control, throughput, and whose jobs wait. */
function QueueCard({ q, cause, canAct }: { q: QueueOverview; cause: QueueCause | undefined; canAct: boolean }) {
  return (
    <section className="panel" aria-labelledby={`q-${q.queue}`} data-testid={`queue-card-${q.queue}`}>
      <div className={styles.head}>
        <div>
          <h2 id={`q-${q.queue}`} className="mono">
            {q.queue}
          </h2>
          <p className="small muted" style={{ margin: 0 }} data-testid={`queue-${q.queue}-state`}>
            {q.paused
              ? `Paused by ${q.paused.by} since ${fmtTime(q.paused.since)}: running jobs finish, nothing new starts.`
              : "Running."}
          </p>
          <WaitCause cause={cause} />
        </div>
        <PauseForm queue={q.queue} paused={q.paused !== null} canAct={canAct} />
      </div>
      <div className={styles.body}>
        <ThroughputChart
          perMinute={q.throughput.perMinute}
          label={throughputLabel(q)}
          testId={`queue-${q.queue}-chart`}
        />
        <dl className="facts" aria-label={`${q.queue} throughput`}>
          <dt>completed, last {THROUGHPUT_MINUTES === 60 ? "hour" : `${THROUGHPUT_MINUTES} min`}</dt>
          <dd>{formatCount(q.throughput.lastHour)}</dd>
          <dt>rate, last {RECENT_MINUTES} min</dt>
          <dd>{formatPerMinute(q.throughput.recentPerMinute)}</dd>
          <dt>busiest minute</dt>
          <dd>{formatCount(Math.max(...q.throughput.perMinute))}</dd>
          <dt>drain</dt>
          <dd>{drainText(q)}</dd>
        </dl>
      </div>
      <h3 className="small" style={{ margin: "0.75rem 0 0" }}>
        Tenants with the most waiting jobs
      </h3>
      {q.topTenants.length === 0 ? (
        <p className="small muted" style={{ margin: "0.25rem 0 0" }}>
          Nobody’s jobs are waiting.
        </p>
      ) : (
        <ul className={styles.tenants}>
          {q.topTenants.map((t) => (
            <li key={t.tenant}>
              <Link href={`/jobs?status=queued&q=${encodeURIComponent(t.tenant)}`}>{t.tenant}</Link>
              <span>{formatCount(t.waiting)} waiting</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
