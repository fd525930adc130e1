import Link from "next/link";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { formatDuration, formatDurationRounded, formatEstimate } from "@/lib/format/duration";
import { getQueuesOverview, RECENT_MINUTES, THROUGHPUT_MINUTES, type QueueOverview } from "@/lib/queues/overview";
import { DataTable, num } from "../../components/data-table";
import { fmtInt, fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { OutsideServicesBanner } from "../(overview)/outside-services-banner";
import { PauseForm } from "./pause-form";
import { ThroughputChart } from "./throughput-chart";
import styles from "./queues.module.css";

export const dynamic = "force-dynamic";
export const metadata = { title: "Queues" };

const perMinute = (n: number) => `${n >= 10 || Number.isInteger(n) ? fmtInt(Math.round(n)) : n.toFixed(1)} / min`;

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
const overBudget = (q: QueueOverview) => q.paused === null && q.oldestWaitingSeconds !== null && q.oldestWaitingSeconds > q.softBudgetSeconds;

function throughputLabel(q: QueueOverview): string {
  const t = q.throughput;
  if (t.lastHour === 0) return `${q.queue}: no job completed in the last hour.`;
  return `${q.queue}: ${fmtInt(t.lastHour)} completed in the last hour, at most ${fmtInt(Math.max(...t.perMinute))} in one minute; ${perMinute(t.recentPerMinute)} over the last ${RECENT_MINUTES} minutes.`;
}

export default async function QueuesPage() {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/queues");
  const isOperator = hasRole(principal, "operator");
  const o = await getQueuesOverview();
  const total = (f: (q: QueueOverview) => number) => o.queues.reduce((n, q) => n + f(q), 0);
  const waiting = total((q) => q.counts.waiting);
  const busy = total((q) => q.slots.busy);
  const slots = total((q) => q.slots.total);
  const late = o.queues.filter(overBudget);
  const paused = o.queues.filter((q) => q.paused);
  const oldest = o.queues.reduce<QueueOverview | null>((best, q) => (q.oldestWaitingSeconds !== null && (best === null || q.oldestWaitingSeconds > best.oldestWaitingSeconds!) ? q : best), null);

  return (
    <main className="page">
      <PageHead
        title="Queues"
        description={
          <>
            What each queue holds now (BullMQ’s counts), how long its oldest queued job has waited and what completes per minute (the job table), and the worker
            slots of the live workers. As of {fmtTime(o.asOf)}.
            {o.timeScale !== 1 ? ` Ages and drain times in production units (time scale ${o.timeScale}); throughput per minute of real time.` : ""}
          </>
        }
      />

      <OutsideServicesBanner />

      <section className={`grid cols-4 ${styles.grid}`} aria-label="Summary">
        <Stat label="Waiting, all queues" value={fmtInt(waiting)} testId="waiting-total" />
        <Stat label="Worker slots busy / total" value={`${fmtInt(busy)} / ${fmtInt(slots)}`} alert={o.workers === 0}>
          <div className="label">{o.workers === 0 ? "no worker is running" : `${fmtInt(o.workers)} live worker process${o.workers === 1 ? "" : "es"}`}</div>
        </Stat>
        <Stat label="Oldest waiting" value={oldest ? formatDurationRounded(oldest.oldestWaitingSeconds! * 1000) : "—"} alert={late.length > 0}>
          <div className="label">
            {oldest ? `on ${oldest.queue}` : "nothing queued"}
            {late.length > 0 ? ` · ${fmtInt(late.length)} queue${late.length === 1 ? "" : "s"} past budget` : ""}
          </div>
        </Stat>
        <Stat label="Paused queues" value={fmtInt(paused.length)} alert={paused.length > 0} testId="paused-total">
          <div className="label">{paused.length > 0 ? paused.map((q) => q.queue).join(", ") : "all running"}</div>
        </Stat>
      </section>

      <section className="panel" aria-labelledby="now-title">
        <h2 id="now-title">Queues now</h2>
        <DataTable
          headings={["Queue", num("Waiting"), num("Active"), num("Delayed"), num("Failed"), num("Oldest waiting / budget"), num("Slots busy / total"), num("Drain")]}
          rows={o.queues}
          testId="queues-table"
          label="Queues now"
          className={styles.table}
        >
          {(q) => (
            <tr key={q.queue} data-queue={q.queue}>
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
                {fmtInt(q.counts.waiting)}
              </td>
              <td className="num">{fmtInt(q.counts.active)}</td>
              <td className="num">{fmtInt(q.counts.delayed)}</td>
              <td className="num">{fmtInt(q.counts.failed)}</td>
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
                {fmtInt(q.slots.busy)} / {fmtInt(q.slots.total)}
                <div className="small muted">
                  {fmtInt(q.slots.workers)} worker{q.slots.workers === 1 ? "" : "s"}
                </div>
              </td>
              <td className={`num ${styles.nowrap}`} data-testid={`queue-${q.queue}-drain`}>
                {q.drain.state === "not-draining" ? <span className="badge bad">not draining</span> : drainText(q)}
              </td>
            </tr>
          )}
        </DataTable>
        <p className="small muted" style={{ marginBottom: 0 }}>
          Waiting counts jobs ready for a worker (a paused queue’s included); failed is the queue’s failed set of the last 7 days — why each ended is on{" "}
          <Link href="/jobs">Jobs</Link>. The oldest wait is measured from when a job last entered the queue, against the smallest soft budget of the
          queue’s kinds. Drain divides the waiting jobs by what completed per minute over the last {RECENT_MINUTES} minutes.
        </p>
      </section>

      <div className={styles.cards}>
        {o.queues.map((q) => (
          <section key={q.queue} className="panel" aria-labelledby={`q-${q.queue}`} data-testid={`queue-card-${q.queue}`}>
            <div className={styles.head}>
              <div>
                <h2 id={`q-${q.queue}`} className="mono">
                  {q.queue}
                </h2>
                <p className="small muted" style={{ margin: 0 }} data-testid={`queue-${q.queue}-state`}>
                  {q.paused ? `Paused by ${q.paused.by} since ${fmtTime(q.paused.since)}: running jobs finish, nothing new starts.` : "Running."}
                </p>
              </div>
              <PauseForm queue={q.queue} paused={q.paused !== null} canAct={isOperator} />
            </div>
            <div className={styles.body}>
              <ThroughputChart perMinute={q.throughput.perMinute} label={throughputLabel(q)} testId={`queue-${q.queue}-chart`} />
              <dl className="facts" aria-label={`${q.queue} throughput`}>
                <dt>completed, last {THROUGHPUT_MINUTES === 60 ? "hour" : `${THROUGHPUT_MINUTES} min`}</dt>
                <dd>{fmtInt(q.throughput.lastHour)}</dd>
                <dt>rate, last {RECENT_MINUTES} min</dt>
                <dd>{perMinute(q.throughput.recentPerMinute)}</dd>
                <dt>busiest minute</dt>
                <dd>{fmtInt(Math.max(...q.throughput.perMinute))}</dd>
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
                    <span>{fmtInt(t.waiting)} waiting</span>
                  </li>
                ))}
              </ul>
            )}
          </section>
        ))}
      </div>
    </main>
  );
}
