import type { JobListItem } from "@/lib/job-views/queries";
import { StatusBadge } from "./status-badge";
import { formatCount } from "@/lib/format/number";
import { fmtOutOf, fmtTime } from "./format";
import { DataTable, num } from "./data-table";
import { JobCells } from "./job-link";

export function JobsTable({ jobs }: { jobs: JobListItem[] }) {
  return (
    <DataTable
      headings={["Job", "Kind", "Tenant", "Status", num("Done / total"), num("Failed items"), "Created"]}
      rows={jobs}
      empty="No jobs match."
    >
      {(j) => (
        <tr key={j.id}>
          <JobCells job={j} />
          <td>
            <StatusBadge status={j.status} />
          </td>
          <td className="num">{fmtOutOf(j.processed + j.failed, j.total)}</td>
          <td className="num">
            {j.failed > 0 ? <strong style={{ color: "var(--bad)" }}>{formatCount(j.failed)}</strong> : "0"}
          </td>
          <td className="small">{fmtTime(j.createdAt)}</td>
        </tr>
      )}
    </DataTable>
  );
}
