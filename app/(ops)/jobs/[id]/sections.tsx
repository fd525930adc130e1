/**
 * The job page's sections (./page.tsx composes them, in order): each renders one panel of the job
 * the page read, and nothing of its own.
 */
import Link from "next/link";
import type { JobDetail } from "@/lib/job-views/queries";
import { StatusBadge, statusTone } from "../../../components/status-badge";
import { formatCount } from "@/lib/format/number";
import { fmtOutOf, fmtTime } from "../../../components/format";
import { env } from "@/lib/env";
import { LiveJobProgress, LiveJobStatus, type RenderedFacts } from "./job-live";
import { DataTable, FirstOf, num } from "../../../components/data-table";
import { formatDuration } from "@/lib/format/duration";
import { MAX_BUDGET_FACTOR } from "@/lib/actions/retry";
import { MAX_PARTS, MIN_PARTS, type SplitPlan } from "@/lib/projection/split-plan";
import type { PlanResult } from "@/lib/actions/split";
import { detailRemovedMessage, nounOf } from "@/lib/jobs/messages";
import { serviceWaitSentence, serviceWaitsOf } from "@/lib/diagnosis/service-waits";
import { STATUS_LABEL } from "@/lib/core/job-statuses";
import type { TokenTotals } from "@/lib/modelcalls/usage";
import type { AnswerReuse } from "@/lib/answers/stats";
import { RetryForm } from "./retry-form";
import { SplitForm } from "./split-form";
import { formatTokens } from "../../model-calls/format";
import { formatUsd } from "@/lib/format/number";

/** Causes nothing clears by itself: a person resumes the queue, starts a worker or grants units. */
const NEEDS_A_PERSON: ReadonlySet<string> = new Set(["queue_paused", "no_worker", "quota_empty"]);

/** The page's head: where the job sits (in its parent, for a part), what and whose it is, and its customer's page. */
export function JobHeader({ job, rendered }: { job: JobDetail; rendered: RenderedFacts }) {
  return (
    <div className="page-head">
      <div>
        <p className="small muted">
          <Link href="/jobs">Jobs</Link> /{" "}
          {job.partOf ? (
            <>
              <Link href={`/jobs/${job.partOf.jobId}`} className="mono">
                {job.partOf.jobId.slice(0, 8)}…
              </Link>{" "}
              / part {job.partOf.index} of {job.partOf.count} /{" "}
            </>
          ) : null}
          <span className="mono">{job.id}</span>
        </p>
        <h1>
          <span className="mono">{job.kind}</span> for {job.tenant} <LiveJobStatus jobId={job.id} rendered={rendered} />
        </h1>
      </div>
      <a className="button secondary" href={`/progress/${job.progressToken}`} target="_blank" rel="noreferrer">
        Customer’s progress page ↗
      </a>
    </div>
  );
}

/** Why a queued or delayed job is not running, from the live state (lib/diagnosis/blocked-by.ts); nothing otherwise. */
export function BlockedBy({ job }: { job: JobDetail }) {
  return job.blockedBy ? (
    <p
      className={`message ${NEEDS_A_PERSON.has(job.blockedBy.type) ? "warn" : "info"}`}
      role="status"
      data-testid="blocked-by"
      data-type={job.blockedBy.type}
    >
      <strong>Why it is waiting:</strong> {job.blockedBy.message}
    </p>
  ) : null;
}

/** A job whose detail the retention pass removed: what is gone, and what its page still shows. */
export function DetailRemoved({ job }: { job: JobDetail }) {
  return job.detailPrunedAt ? (
    <p className="message info" role="note" data-testid="detail-removed">
      <strong>Details removed:</strong> {detailRemovedMessage(new Date(job.detailPrunedAt))} It cannot be retried or
      split; send the work again as a new job.
    </p>
  ) : null;
}

/** The live progress, the job's message and the waits for outside services not charged to its budget. */
export function ProgressPanel({ job, rendered }: { job: JobDetail; rendered: RenderedFacts }) {
  return (
    <section className="panel">
      <LiveJobProgress
        jobId={job.id}
        rendered={rendered}
        attempt={job.attempt}
        noun={nounOf(job.kind)}
        timeScale={env().BOUNDED_TIME_SCALE}
      />
      {job.message ? <p className={`message ${statusTone(job.status)}`}>{job.message}</p> : null}
      {serviceWaitsOf(job.events, job.attemptStartedAt).map((w) => (
        <p key={w.from} className="small" data-testid="service-wait">
          {serviceWaitSentence(w, formatDuration)} Not charged to its budget.
        </p>
      ))}
    </section>
  );
}

/** Why the retry form is disabled for this viewer and job; null when it is not. */
function retryDisabledReason(job: JobDetail, isOperator: boolean, retryable: boolean): string | null {
  return !isOperator
    ? "Only operators can retry jobs; you are signed in as a viewer."
    : !retryable
      ? job.children.length > 0
        ? "This job was split into parts: retry the parts instead."
        : `Nothing to retry: the job is ${STATUS_LABEL[job.status].toLowerCase()}.`
      : null;
}

/** What a retry does, and the form to ask for one (with a larger budget if needed). */
export function RetryPanel({
  job,
  isOperator,
  retryable,
}: {
  job: JobDetail;
  isOperator: boolean;
  retryable: boolean;
}) {
  return (
    <section className="panel" aria-labelledby="retry-heading">
      <h2 id="retry-heading">Retry</h2>
      <p className="muted small">
        Puts the job back in its queue; it goes on from where it stopped, and the{" "}
        {formatCount(job.processed + job.failed)} items already done are not done again. It gets a fresh budget (or a
        larger one, up to {MAX_BUDGET_FACTOR}×). The customer’s progress link keeps working.
      </p>
      <RetryForm
        jobId={job.id}
        canAct={isOperator && retryable}
        disabledReason={retryDisabledReason(job, isOperator, retryable)}
        softS={Math.round(job.budgetSoftMs / 1000)}
        maxSoftS={Math.round((job.budgetSoftMs * MAX_BUDGET_FACTOR) / 1000)}
      />
    </section>
  );
}

/** Splitting the rest of the job: a part's pointer to retry, a split job's parts, the proposal, or why it cannot. */
export function SplitPanel({
  job,
  split,
  isOperator,
}: {
  job: JobDetail;
  split: PlanResult | null;
  isOperator: boolean;
}) {
  return (
    <section className="panel" aria-labelledby="split-heading">
      <h2 id="split-heading">Split the rest into parts</h2>
      {job.partOf ? (
        <p className="muted small">
          This job is part {job.partOf.index} of {job.partOf.count} of a split job: retry it instead, with a larger
          budget if needed.
        </p>
      ) : job.children.length > 0 ? (
        <p className="message info" role="status">
          {job.splitBy === "auto" ? "Projected not to fit its budget, so it split itself" : "Split"} into{" "}
          {job.splitParts ?? job.children.length} parts, run one after another
          {job.splitParts !== null && job.children.length < job.splitParts
            ? ` (${job.children.length} made so far, below)`
            : " (below)"}
          ; the job ends when the last part ends.
        </p>
      ) : split?.type === "plan" ? (
        <SplitProposal jobId={job.id} plan={split.plan} isOperator={isOperator} />
      ) : (
        <p className="muted small">{split?.type === "not_splittable" ? split.message : "This job cannot be split."}</p>
      )}
    </section>
  );
}

/** The proposed split with its arithmetic, a form to recalculate it for another number of parts, and the split form. */
function SplitProposal({ jobId, plan, isOperator }: { jobId: string; plan: SplitPlan; isOperator: boolean }) {
  return (
    <>
      <p className="muted small">
        Each part is a job of its own with a fresh budget; parts run one after another, each sized from the projected
        rate (what a {plan.noun} really costs end to end, its concurrency and the provider's limits) so it finishes
        inside its budget with room to spare. The customer’s progress page shows one job.
      </p>
      <p className="plan" data-testid="split-arithmetic">
        {plan.arithmetic}
      </p>
      <p className="muted small">Figures: {plan.projection.basis}.</p>
      <form method="get" className="inline-form">
        <label className="field">
          Parts ({MIN_PARTS}–{Math.min(MAX_PARTS, plan.remaining)})
          <input
            type="number"
            name="parts"
            min={MIN_PARTS}
            max={Math.min(MAX_PARTS, plan.remaining)}
            defaultValue={plan.parts}
          />
        </label>
        <button type="submit" className="secondary">
          Recalculate
        </button>
      </form>
      <SplitForm
        jobId={jobId}
        parts={plan.parts}
        canAct={isOperator}
        disabledReason={isOperator ? null : "Only operators can split jobs; you are signed in as a viewer."}
      />
    </>
  );
}

/** The parts a split job runs, one row each with its range and progress; nothing for a job not split. */
export function PartsPanel({ job }: { job: JobDetail }) {
  return job.children.length > 0 ? (
    <section className="panel" aria-labelledby="parts-heading">
      <h2 id="parts-heading">
        Parts{" "}
        <span className="muted small">
          ({job.children.filter((c) => c.status === "completed" || c.status === "completed_with_errors").length} of{" "}
          {job.children.length} completed)
        </span>
      </h2>
      <DataTable
        headings={[
          num("Part"),
          num(`${nounOf(job.kind)[0]!.toUpperCase() + nounOf(job.kind).slice(1)}s`),
          "Status",
          num("Done"),
          num("Failed"),
          num("Attempt"),
          "Message",
        ]}
        rows={job.children}
      >
        {(c) => (
          <tr key={c.id} data-part={c.index}>
            <td className="num">
              <Link href={`/jobs/${c.id}`}>{c.index}</Link>
            </td>
            <td className="num">
              {formatCount(c.from + 1)}–{formatCount(c.to)}
            </td>
            <td>
              <StatusBadge status={c.status} />
            </td>
            <td className="num">{fmtOutOf(c.processed + c.failed, c.total)}</td>
            <td className="num">{formatCount(c.failed)}</td>
            <td className="num">{c.attempt}</td>
            <td className="small">{c.message ?? "—"}</td>
          </tr>
        )}
      </DataTable>
    </section>
  ) : null;
}

/** The job's facts: queue, budget, cursor, file, times, model tokens and the answers it reused. */
export function DetailsPanel({ job, tokens, reuse }: { job: JobDetail; tokens: TokenTotals; reuse: AnswerReuse }) {
  return (
    <section className="panel">
      <h2>Details</h2>
      <dl className="facts">
        <dt>Queue</dt>
        <dd className="mono">{job.queue}</dd>
        <dt>Budget</dt>
        <dd>
          soft {formatDuration(job.budgetSoftMs)}, hard {formatDuration(job.budgetHardMs)}{" "}
          <span className="muted small">({job.budgetSource})</span>
        </dd>
        <dt>Cursor</dt>
        <dd className="num">
          {formatCount(job.cursor)} {job.cursor === 1 ? "item" : "items"} read
        </dd>
        <dt>File</dt>
        <dd>
          {job.upload
            ? `${job.upload.filename} (${formatCount(job.upload.sizeBytes)} bytes, “${job.upload.delimiter}” separated)`
            : "—"}
        </dd>
        <dt>Created</dt>
        <dd>{fmtTime(job.createdAt)}</dd>
        <dt>Started</dt>
        <dd>{fmtTime(job.startedAt)}</dd>
        <dt>Finished</dt>
        <dd>{fmtTime(job.finishedAt)}</dd>
        <dt>Last heartbeat</dt>
        <dd>{fmtTime(job.heartbeatAt)}</dd>
        <dt>Model tokens</dt>
        <dd className="num" data-testid="job-tokens">
          {tokens.calls === 0
            ? "—"
            : `${formatTokens(tokens.promptTokens + tokens.completionTokens)}, estimated ${formatUsd(tokens.costUsd)}${tokens.unpriced ? " (some unpriced)" : ""}`}
        </dd>
        {reuse.model + reuse.job + reuse.cache > 0 ? (
          <>
            <dt>Answers reused</dt>
            <dd data-testid="job-answer-reuse">
              {formatCount(reuse.cache)} {reuse.cache === 1 ? "row" : "rows"} from stored answers,{" "}
              {formatCount(reuse.job)} shared within the job, {formatCount(reuse.model)} asked the model; saved{" "}
              {reuse.saved.calls.toFixed(1)} calls,{" "}
              {formatTokens(reuse.saved.promptTokens + reuse.saved.completionTokens)}, estimated{" "}
              {formatUsd(reuse.saved.costUsd)}
              {reuse.saved.unpriced ? " (some unpriced)" : ""}
            </dd>
            <dt>Answered by</dt>
            <dd data-testid="job-answered-by">
              {reuse.byModel
                .map(
                  (m) =>
                    `${m.model}${m.provider ? ` (${m.provider})` : ""}: ${formatCount(m.rows)} ${m.rows === 1 ? "row" : "rows"}`,
                )
                .join("; ")}
            </dd>
          </>
        ) : null}
      </dl>
    </section>
  );
}

/** The job's item failures (and its parts'), the first of them when there are more than were read. */
export function FailuresPanel({ job }: { job: JobDetail }) {
  return (
    <section className="panel">
      <h2>
        Item failures <span className="muted small">({formatCount(job.failuresTotal)})</span>
      </h2>
      <DataTable
        headings={[num("Row"), "Reason", num("Attempt")]}
        rows={job.failures}
        empty="No item failed."
        after={<FirstOf shown={job.failures.length} total={job.failuresTotal} />}
      >
        {(f) => (
          <tr key={f.row}>
            <td className="num">{f.row}</td>
            <td>{f.reason}</td>
            <td className="num">{f.attempt}</td>
          </tr>
        )}
      </DataTable>
    </section>
  );
}
