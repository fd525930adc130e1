import { formatCount } from "@/lib/format/number";
import { getJobLane } from "@/lib/runs/batch-lane";
import { fmtTime } from "../../../components/format";

/**
 * The job's lane (lib/runs/batch-lane.ts): the decision taken at its start with its arithmetic and,
 * when it took the batch lane, its batch at the provider — id, status, counts, when it is expected,
 * the last moment to finish directly and the deadline, and why it stopped waiting.
 */
export async function BatchLanePanel({ jobId }: { jobId: string }) {
  const lane = await getJobLane(jobId);
  if (!lane) return null;
  const b = lane.batch;
  return (
    <section className="panel" aria-labelledby="lane-heading" data-testid="job-lane">
      <h2 id="lane-heading">Lane: {b ? "the provider's Batch API" : "direct calls"}</h2>
      {lane.decisions.map((d) => (
        <p key={d.at.toISOString()} className="small" data-testid="lane-decision">
          {d.message}
        </p>
      ))}
      {b ? (
        <dl className="facts" data-testid="lane-batch">
          <dt>Batch</dt>
          <dd className="mono">{b.batchId}</dd>
          <dt>Status</dt>
          <dd>
            {b.status}
            {b.fallback ? ` — ${b.fallback}; finishing directly` : ""}
          </dd>
          <dt>Rows</dt>
          <dd className="num">
            {formatCount(b.completed)} answered, {formatCount(b.failed)} failed of {formatCount(b.rows)} sent
          </dd>
          <dt>Sent</dt>
          <dd>{fmtTime(b.submittedAt.toISOString())}</dd>
          <dt>Expected by</dt>
          <dd>{fmtTime(b.expectedBy.toISOString())}</dd>
          <dt>Last moment</dt>
          <dd>{fmtTime(b.lastMomentAt.toISOString())}</dd>
          <dt>Deadline</dt>
          <dd>{fmtTime(b.deadlineAt.toISOString())}</dd>
          <dt>Ended</dt>
          <dd>{fmtTime(b.endedAt?.toISOString() ?? null)}</dd>
        </dl>
      ) : null}
    </section>
  );
}
