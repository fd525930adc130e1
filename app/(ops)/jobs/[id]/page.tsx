import { notFound } from "next/navigation";
import { getJob, type JobDetail } from "@/lib/job-views/queries";
import { readJobFacts } from "@/lib/progress/operator";
import { JobStream, type RenderedFacts } from "./job-live";
import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { MAX_PARTS, MIN_PARTS } from "@/lib/projection/split-plan";
import { planSplit, type PlanResult } from "@/lib/actions/split";
import { isTerminal } from "@/lib/core/job-statuses";
import { CancelForm } from "./cancel-form";
import { ForensicsSummary, Timeline } from "./timeline";
import { BatchLanePanel } from "./batch-lane";
import { getJobForensics, type JobForensics } from "@/lib/reports/forensics";
import { forensicsInProductionTime } from "@/lib/reports/production-time";
import { deliveriesOfJob, type DeliveryView } from "@/lib/webhooks/deliveries";
import { WebhookDeliveries } from "./webhook-deliveries";
import { getJobTokenUsage, type TokenTotals } from "@/lib/modelcalls/usage";
import { getJobAnswerReuse, type AnswerReuse } from "@/lib/answers/stats";
import { nounOf } from "@/lib/jobs/messages";
import { ReaskPanel } from "./reask";
import {
  BlockedBy,
  DetailRemoved,
  DetailsPanel,
  FailuresPanel,
  JobHeader,
  PartsPanel,
  ProgressPanel,
  RetryPanel,
  SplitPanel,
} from "./sections";

export const dynamic = "force-dynamic";
export const metadata = { title: "Job" };

/** What the page shows: the job, whether its viewer may act on it, and what each section reads. */
interface JobView {
  job: JobDetail;
  isOperator: boolean;
  retryable: boolean;
  split: PlanResult | null;
  forensics: JobForensics;
  deliveries: DeliveryView[];
  tokens: TokenTotals;
  reuse: AnswerReuse;
  rendered: RenderedFacts;
}

/** Checks the viewer, then reads the job and everything its sections show; a 404 for an unknown job. */
async function loadJobView(
  params: Promise<{ id: string }>,
  searchParams: Promise<{ parts?: string | string[] }>,
): Promise<JobView> {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  const principal = await requirePageViewer("/jobs");
  // Before the row is read: facts the stream computed after this moment are at least as new.
  const renderedAt = Date.now();
  const job = await getJob((await params).id);
  if (!job) notFound();
  const isOperator = hasRole(principal, "operator");
  const retryable =
    (RETRYABLE_STATUSES as readonly string[]).includes(job.status) && job.children.length === 0 && !job.detailPrunedAt;
  // The proposal for the k the operator asked to see (?parts=), or the one the latencies give.
  const asked = Number((await searchParams).parts);
  const askedParts = Number.isInteger(asked) && asked >= MIN_PARTS && asked <= MAX_PARTS ? asked : undefined;
  const [split, forensics, deliveries, tokens, reuse, stored] = await Promise.all([
    job.partOf || job.children.length > 0 ? Promise.resolve(null) : planSplit(job.id, { parts: askedParts }),
    getJobForensics(job.id).then((recorded) => recorded && forensicsInProductionTime(recorded)),
    deliveriesOfJob(job.id),
    getJobTokenUsage(job.id),
    getJobAnswerReuse(job.id),
    // The pace and time left, as the customer's page reads them (only while it runs).
    job.status === "running" ? readJobFacts(job.progressToken) : Promise.resolve(null),
  ]);
  if (!forensics) notFound();
  const rendered: RenderedFacts = {
    at: renderedAt,
    status: job.status,
    terminal: isTerminal(job.status),
    total: job.total,
    processed: job.processed,
    failed: job.failed,
    perSecond: stored?.perSecond ?? null,
    etaSeconds: stored?.etaSeconds ?? null,
  };
  return { job, isOperator, retryable, split, forensics, deliveries, tokens, reuse, rendered };
}

/** A job's page: its sections (./sections.tsx) in order, over what loadJobView read. */
export default async function JobPage({
  params,
  searchParams,
}: {
  params: Promise<{ id: string }>;
  searchParams: Promise<{ parts?: string | string[] }>;
}) {
  const { job, isOperator, retryable, split, forensics, deliveries, tokens, reuse, rendered } = await loadJobView(
    params,
    searchParams,
  );
  const done = job.processed + job.failed;
  // Its detail pruned (lib/retention): what it was and how it ended, without sections left empty.
  if (job.detailPrunedAt)
    return (
      <main className="page">
        <JobHeader job={job} rendered={rendered} />
        <DetailRemoved job={job} />
        <ProgressPanel job={job} rendered={rendered} />
        <DetailsPanel job={job} tokens={tokens} reuse={reuse} />
        <WebhookDeliveries deliveries={deliveries} />
      </main>
    );
  return (
    <main className="page">
      {/* Operators follow a running job on its stream; viewers' pages, and ended jobs, refresh on the timer. */}
      <JobStream jobId={job.id} follow={isOperator && job.status === "running"} />
      <JobHeader job={job} rendered={rendered} />
      <BlockedBy job={job} />
      <ProgressPanel job={job} rendered={rendered} />
      <CancelForm
        jobId={job.id}
        status={job.status}
        canAct={isOperator}
        noun={nounOf(job.kind)}
        done={done}
        parts={job.children.length}
      />
      <div className="grid cols-2">
        <RetryPanel job={job} isOperator={isOperator} retryable={retryable} />
        <SplitPanel job={job} split={split} isOperator={isOperator} />
      </div>
      <PartsPanel job={job} />
      <ReaskPanel job={job} isOperator={isOperator} />
      <div className="grid cols-2">
        <DetailsPanel job={job} tokens={tokens} reuse={reuse} />
        <ForensicsSummary f={forensics} />
      </div>
      <BatchLanePanel jobId={job.id} />
      <Timeline f={forensics} />
      <WebhookDeliveries deliveries={deliveries} />
      <FailuresPanel job={job} />
    </main>
  );
}
