import Link from "next/link";
import { requirePageViewer } from "@/lib/auth/principal";
import { auditFilterSchema, listAudit } from "@/lib/audit/audit";
import { fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { FilterForm } from "../../components/filter-form";
import { SelectField, TextField } from "../../components/field";
import { DataTable } from "../../components/data-table";

export const dynamic = "force-dynamic";
export const metadata = { title: "Audit log" };

type Search = Record<string, string | string[] | undefined>;
const TONE = { ok: "ok", refused: "warn", error: "bad" } as const;
const RESULTS = Object.keys(TONE);

/** Every operator action, allowed or refused, newest first. Read-only: the table refuses edits. */
export default async function AuditPage({ searchParams }: { searchParams: Promise<Search> }) {
  await requirePageViewer("/audit");
  const raw = Object.fromEntries(
    Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== ""),
  ) as Record<string, string>;
  const parsed = auditFilterSchema.safeParse(raw);
  const { entries, nextBefore } = await listAudit(parsed.success ? parsed.data : {});
  return (
    <main className="page">
      <PageHead
        title="Audit log"
        description="Every operator action — who, role, what, on what, with which parameters, the result, when, from where. Entries cannot be changed or removed."
      />
      <FilterForm clearHref="/audit">
        <TextField label="Actor" name="actor" defaultValue={raw.actor} placeholder="user name or anonymous" />
        <TextField label="Action" name="action" defaultValue={raw.action} placeholder="e.g. job.retry" />
        <TextField label="Target" name="target" defaultValue={raw.target} placeholder="job id" />
        <SelectField label="Result" name="result" any="any" defaultValue={raw.result ?? ""} options={RESULTS} />
      </FilterForm>
      {entries.length === 0 ? (
        <div className="panel empty">No entry matches.</div>
      ) : (
        <DataTable headings={["When", "Who", "Action", "Target", "Parameters", "Result", "From"]} rows={entries}>
          {(e) => (
            <tr key={e.id}>
              <td className="small">{fmtTime(e.at)}</td>
              <td>
                {e.actor} {e.role ? <span className="muted small">({e.role})</span> : null}
              </td>
              <td className="mono">{e.action}</td>
              <td className="mono small">
                {e.target ? (
                  e.target.length === 36 ? (
                    <Link href={`/jobs/${e.target}`}>{e.target.slice(0, 8)}</Link>
                  ) : (
                    e.target
                  )
                ) : (
                  "—"
                )}
              </td>
              <td className="mono small">{e.params ? JSON.stringify(e.params) : "—"}</td>
              <td>
                <span className={`badge ${TONE[e.result]}`}>{e.result}</span>
                <div className="small">{e.message}</div>
              </td>
              <td className="small">{e.clientAddress ?? "—"}</td>
            </tr>
          )}
        </DataTable>
      )}
      {nextBefore ? (
        <div className="pager">
          <Link className="button secondary" href={`/audit?${new URLSearchParams({ ...raw, before: nextBefore })}`}>
            Older entries →
          </Link>
        </div>
      ) : null}
    </main>
  );
}
