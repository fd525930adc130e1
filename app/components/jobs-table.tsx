import Link from "next/link";
import type { JobSummary } from "@/lib/jobs/queries";
import { StatusBadge } from "./status-badge";
import { fmtInt, fmtTime } from "./format";

export function JobsTable({ jobs }: { jobs: JobSummary[] }) {
  if (jobs.length === 0) return <div className="empty">No jobs match.</div>;
  return (
    <div className="table-wrap">
      <table className="data">
        <thead>
          <tr>
            <th>Job</th>
            <th>Kind</th>
            <th>Tenant</th>
            <th>Status</th>
            <th className="num">Done / total</th>
            <th className="num">Failed items</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((j) => (
            <tr key={j.id}>
              <td>
                <Link href={`/jobs/${j.id}`} className="mono">
                  {j.id.slice(0, 8)}
                </Link>
              </td>
              <td className="mono">{j.kind}</td>
              <td>{j.tenant}</td>
              <td>
                <StatusBadge status={j.status} />
              </td>
              <td className="num">
                {fmtInt(j.processed + j.failed)} / {j.total === null ? "?" : fmtInt(j.total)}
              </td>
              <td className="num">{j.failed > 0 ? <strong style={{ color: "var(--bad)" }}>{fmtInt(j.failed)}</strong> : "0"}</td>
              <td className="small">{fmtTime(j.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
