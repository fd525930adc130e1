import Link from "next/link";

/** A job's short id (its first eight characters), linking to its page. */
export function JobLink({ id }: { id: string }) {
  return (
    <Link className="mono" href={`/jobs/${id}`}>
      {id.slice(0, 8)}
    </Link>
  );
}

/** The cells that name a job in a table row: its link, its kind and its tenant. */
export function JobCells({ job }: { job: { id: string; kind: string; tenant: string } }) {
  return (
    <>
      <td>
        <JobLink id={job.id} />
      </td>
      <td className="mono">{job.kind}</td>
      <td>{job.tenant}</td>
    </>
  );
}
