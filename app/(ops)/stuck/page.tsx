import Link from "next/link";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { getStuckCounts, listOverdueDelayedJobs, type OverdueDelayedJob } from "@/lib/reports/stuck";
import { reapGraceMs, reaperIntervalMs } from "@/lib/jobs/liveness";
import {
  getStuckOverview,
  stuckHeadline,
  type StuckGroup,
  type StuckHeadline,
  type StuckOverview,
} from "@/lib/reports/stuck-groups";
import { STUCK_CAUSES, type StuckCause, type StuckGroupJob } from "@/lib/diagnosis/stuck-causes";
import { STUCK_ACTION_CAP } from "@/lib/actions/mark-failed";
import { ACTION_LABEL, type OperatorAction } from "@/lib/diagnosis/resume-policy";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { StatusBadge } from "../../components/status-badge";
import { formatCount } from "@/lib/format/number";
import { fmtAgo, fmtOutOf, fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { Stat } from "../../components/stat";
import { DataTable, num } from "../../components/data-table";
import { JobCells, JobLink } from "../../components/job-link";
import { GroupAction } from "./group-action";

export const dynamic = "force-dynamic";
export const metadata = { title: "Stuck jobs" };

/** What each group means and what its action does, said once above its table. */
const EXPLAIN: Record<StuckCause, string> = {
  awaiting_operator:
    "These ended and nothing will continue them but a person: a cause of their own (a budget too small, a kind that cannot split, an input it cannot get past, a worker killed with it too often), or an outside service that kept failing through the platform's own resumes. Their customers were told our team will continue them. Do what the Action column says on each job's page, or retry them all with their usual budget; mark handled those you dealt with otherwise.",
  lost_from_queue:
    "The row says it is open but the queue no longer holds it: nothing would run it. The reaper queues these again on its next pass, to resume from where they stopped; mark them failed to end them instead.",
  over_hard_limit:
    "Running longer than the hard limit: the runtime should have stopped them. Mark them failed to end them (they can be retried from their cursor).",
  heartbeat_lost:
    "Running, but three heartbeats missed: the worker is probably gone. Past their hard limit the reaper resumes them on another worker (at most 3 times, then ends them as failed); mark them failed to end them now.",
  late_start:
    "Waiting far longer than their queue's pace explains (over 3× the expected wait given the jobs ahead of them, and over their soft budget). Jobs in a paused queue are never late.",
};

/** Where each action is done: a larger budget and a split are chosen on the job's page. */
function ActionCell({ id, action }: { id: string; action: OperatorAction | undefined }) {
  if (!action) return <>—</>;
  return <Link href={`/jobs/${id}`}>{ACTION_LABEL[action]}</Link>;
}

function pageHref(pages: Partial<Record<StuckCause, number>>, cause: StuckCause, page: number): string {
  const next = new URLSearchParams();
  for (const c of STUCK_CAUSES) {
    const p = c === cause ? page : pages[c];
    if (p && p > 1) next.set(c, String(p));
  }
  const q = next.toString();
  return `/stuck${q ? `?${q}` : ""}#${cause}`;
}

function ageCell(cause: StuckCause, j: StuckGroupJob) {
  if (cause === "late_start")
    return `waited ${formatDurationRounded(j.ageMs)}${j.expectedMs !== null ? ` / expected ${formatDurationRounded(j.expectedMs)}` : ""}`;
  if (cause === "over_hard_limit")
    return `ran ${formatDurationRounded(j.ageMs)} / hard ${formatDuration(j.budgetHardMs)}`;
  if (cause === "heartbeat_lost") return `silent ${formatDurationRounded(j.ageMs)}`;
  return `open ${formatDurationRounded(j.ageMs)}`;
}

/** One cause's group: its heading and actions, its jobs (for a group with any), and its pages. */
function GroupSection({
  group,
  pages,
  canAct,
}: {
  group: StuckGroup;
  pages: Partial<Record<StuckCause, number>>;
  canAct: boolean;
}) {
  const { cause } = group;
  return (
    // An empty group stays on the page as one slim line: the result of the action that emptied it stays readable.
    <section
      className="panel"
      id={cause}
      aria-labelledby={`${cause}-title`}
      data-testid={`group-${cause}`}
      style={group.count === 0 ? { padding: "0.6rem 1.25rem", marginBottom: "0.6rem" } : undefined}
    >
      <GroupHead group={group} canAct={canAct} />
      {group.count === 0 ? null : (
        <>
          <p className="muted small">{EXPLAIN[cause]}</p>
          {cause === "awaiting_operator" ? <AwaitingOperatorTable group={group} /> : <StuckJobsTable group={group} />}
        </>
      )}
      <GroupPager group={group} pages={pages} />
    </section>
  );
}

/** A group's title and count (slim when it is empty), and the actions on all of its jobs. */
function GroupHead({ group, canAct }: { group: StuckGroup; canAct: boolean }) {
  const { cause } = group;
  return (
    <div className="page-head" style={{ marginBottom: group.count === 0 ? 0 : "0.5rem" }}>
      <h2
        id={`${cause}-title`}
        style={{
          margin: 0,
          fontSize: group.count === 0 ? "1rem" : undefined,
          fontWeight: group.count === 0 ? 500 : undefined,
        }}
      >
        {group.title} <span data-testid={`count-${cause}`}>({formatCount(group.count)})</span>
        {group.count === 0 ? <span className="muted"> — none</span> : null}
      </h2>
      <div style={{ display: "flex", flexWrap: "wrap", gap: "0.5rem", alignItems: "flex-start" }}>
        {group.actions.map((intent) => (
          <GroupAction
            key={intent}
            cause={cause}
            title={group.title}
            intent={intent}
            ids={group.ids}
            cap={STUCK_ACTION_CAP}
            canAct={canAct}
            disabledReason={canAct ? null : "Only operators can act on stuck jobs; you are signed in as a viewer."}
          />
        ))}
      </div>
    </div>
  );
}

/** The ended jobs that wait for a person: why each ended, what to do, and how long its customer has waited. */
function AwaitingOperatorTable({ group }: { group: StuckGroup }) {
  return (
    <DataTable
      // What to do first (the cause, the action, how long the customer has waited), then who: on a phone the first columns are what shows.
      headings={[
        "Job",
        "Why it ended",
        "Action",
        num("Customer waiting"),
        num("Waiting on us"),
        "Kind · tenant",
        num("Done / total"),
      ]}
      rows={group.jobs}
      label={`${group.title}, newest first`}
      style={{ minWidth: "50rem" }}
    >
      {(j) => (
        <tr key={j.id} data-job={j.id}>
          <td>
            <JobLink id={j.id} />
          </td>
          <td>
            <StatusBadge status={j.status} /> {j.why}
          </td>
          <td data-testid="action">
            <ActionCell id={j.id} action={j.action} />
          </td>
          <td className="num" data-testid="customer-wait">
            {formatDurationRounded(j.customerWaitMs ?? 0)}
          </td>
          <td
            className="num"
            data-testid="our-wait"
            title={j.finishedAt ? `ended ${fmtTime(j.finishedAt)}` : undefined}
          >
            {formatDurationRounded(j.ageMs)}
          </td>
          <td>
            <span className="mono">{j.kind}</span> · {j.tenant}
          </td>
          <td className="num">{fmtOutOf(j.processed + j.failed, j.total)}</td>
        </tr>
      )}
    </DataTable>
  );
}

/** An open cause's jobs: why each is stuck, for how long, its last heartbeat and where the queue has it. */
function StuckJobsTable({ group }: { group: StuckGroup }) {
  const { cause } = group;
  return (
    <DataTable
      headings={[
        "Job",
        "Kind · tenant",
        "Status",
        "Why",
        num("How long"),
        "Last heartbeat",
        "Queue",
        num("Done / total"),
      ]}
      rows={group.jobs}
      label={`${group.title}, newest first`}
      // Scrolls sideways on a phone rather than squeezing the reason into a sliver.
      style={{ minWidth: "56rem" }}
    >
      {(j) => (
        <tr key={j.id} data-job={j.id}>
          <td>
            <JobLink id={j.id} />
          </td>
          <td>
            <span className="mono">{j.kind}</span> · {j.tenant}
          </td>
          <td>
            <StatusBadge status={j.status} />
          </td>
          <td>{j.why}</td>
          <td className="num">{ageCell(cause, j)}</td>
          <td className="small">{j.heartbeatAt ? fmtAgo(j.heartbeatAt) : "never"}</td>
          <td className="mono">{`${j.queue}: ${j.queueState}`}</td>
          <td className="num">{fmtOutOf(j.processed + j.failed, j.total)}</td>
        </tr>
      )}
    </DataTable>
  );
}

/** Newer and older pages of a group with more than one; nothing otherwise. */
function GroupPager({ group, pages }: { group: StuckGroup; pages: Partial<Record<StuckCause, number>> }) {
  const { cause } = group;
  return group.pages > 1 ? (
    <nav className="pager" aria-label={`${group.title}: pages`} style={{ gap: "0.6rem", alignItems: "center" }}>
      {group.page > 1 ? (
        <Link className="button secondary" href={pageHref(pages, cause, group.page - 1)}>
          ← Newer
        </Link>
      ) : null}
      <span className="muted small">
        Page {formatCount(group.page)} of {formatCount(group.pages)}
      </span>
      {group.page < group.pages ? (
        <Link className="button secondary" href={pageHref(pages, cause, group.page + 1)}>
          Older →
        </Link>
      ) : null}
    </nav>
  ) : null;
}

/** The stuck jobs, worst first: those awaiting a person, then open ones by why they are stuck, then delayed ones overdue. */
export default async function StuckPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/stuck");
  const raw = await searchParams;
  const pages: Partial<Record<StuckCause, number>> = {};
  for (const c of STUCK_CAUSES) {
    const v = Number(raw[c]);
    if (Number.isInteger(v) && v > 1) pages[c] = Math.min(v, 10_000);
  }
  const [overview, { delayed }, overdue] = await Promise.all([
    getStuckOverview(pages),
    getStuckCounts(),
    listOverdueDelayedJobs(),
  ]);
  const canAct = hasRole(principal, "operator");
  const headline = stuckHeadline(overview);
  const { stuckNow, awaitingOperator } = headline;
  // Worst first: the causes' order is their severity; empty groups follow, one line each (kept,
  // not hidden, so the result of the action that emptied one stays on the screen).
  const shown = [...overview.groups.filter((g) => g.count > 0), ...overview.groups.filter((g) => g.count === 0)];
  const scale = env().BOUNDED_TIME_SCALE;
  return (
    <main className="page">
      <PageHead
        title="Stuck jobs"
        description={
          <>
            First the jobs that ended and wait for a person, then open jobs grouped by why they are stuck, worst first.
            The reaper resumes a job silent past its hard limit (at most 3 times, then it ends failed and waits here)
            and reconciles rows with the queue (it looks every {formatDuration(reaperIntervalMs())}, with a grace of{" "}
            {formatDuration(reapGraceMs())}, real time).
            {scale !== 1 ? ` Ages and budgets are in production units (time scale ${scale}).` : ""}
          </>
        }
      />

      <Summary headline={headline} overview={overview} delayed={delayed} />

      {stuckNow === 0 && awaitingOperator === 0 ? (
        <p className="message ok" style={{ marginBottom: "1.25rem" }}>
          Nothing is stuck: no ended job waits for a person, and no open job is lost, past its hard limit, silent, or
          waiting far past its expected start.
        </p>
      ) : null}

      <div style={{ marginTop: "1.25rem" }}>
        {shown.map((g) => (
          <GroupSection key={g.cause} group={g} pages={pages} canAct={canAct} />
        ))}
      </div>

      <OverdueDelayed overdue={overdue} />
    </main>
  );
}

/** The counts: open jobs stuck, ended jobs awaiting an operator, and those waiting that are not stuck. */
function Summary({
  headline: { stuckNow, awaitingOperator, openCauses },
  overview,
  delayed,
}: {
  headline: StuckHeadline;
  overview: StuckOverview;
  delayed: number;
}) {
  return (
    <section className="grid cols-4" aria-label="Summary">
      <Stat label="Stuck now (open jobs)" value={formatCount(stuckNow)} alert={stuckNow > 0} testId="stuck-now">
        <div className="label">{stuckNow > 0 ? openCauses : "none lost, late, silent or over the limit"}</div>
      </Stat>
      <Stat
        label="Awaiting an operator (ended)"
        value={formatCount(awaitingOperator)}
        alert={awaitingOperator > 0}
        href="#awaiting_operator"
        testId="awaiting-operator"
      >
        <div className="label">
          {awaitingOperator > 0
            ? "only a person continues these; see the first group"
            : "no ended job waits for a person"}
        </div>
      </Stat>
      <Stat
        label="Waiting in paused queues (not late)"
        value={formatCount(overview.waitingInPausedQueues)}
        href="/queues"
      >
        <div className="label">
          {overview.paused.length
            ? overview.paused.map((p) => `${p.queue} paused by ${p.by} since ${fmtTime(p.since)}`).join("; ")
            : "no queue is paused"}
        </div>
      </Stat>
      <Stat
        label="Delayed, going on by themselves (not stuck)"
        value={formatCount(delayed)}
        href="/jobs?status=delayed"
      >
        <div className="label">for a rate limit, a service that is down or the batch service</div>
      </Stat>
    </section>
  );
}

/** Delayed jobs past their wake-up time (not stuck, never reaped); nothing when there are none. */
function OverdueDelayed({ overdue }: { overdue: OverdueDelayedJob[] }) {
  return overdue.length > 0 ? (
    <section
      className="panel"
      style={{ marginTop: "1.25rem" }}
      aria-labelledby="overdue-title"
      data-testid="overdue-delayed"
    >
      <h2 id="overdue-title">Delayed past their wake-up time ({formatCount(overdue.length)})</h2>
      <p className="muted small">
        Waiting in delayed is not stuck, and these are never reaped; but they should have gone back to a worker by now
        (see <Link href="/limiter">the limiter</Link>).
      </p>
      <DataTable headings={["Job", "Kind", "Tenant", "Due back", num("Overdue by"), "Queue state"]} rows={overdue}>
        {(d) => (
          <tr key={d.id}>
            <JobCells job={d} />
            <td className="small">{fmtTime(d.wakeUpAt)}</td>
            <td className="num">{formatDurationRounded(d.overdueMs)}</td>
            <td className="mono">{d.queueState}</td>
          </tr>
        )}
      </DataTable>
    </section>
  ) : null;
}
