import Link from "next/link";
import { requirePageViewer } from "@/lib/auth/principal";
import { auditFilterSchema, listAudit } from "@/lib/audit/audit";
import { fmtTime } from "../../components/format";

export const dynamic = "force-dynamic";
export const metadata = { title: "Audit log" };

type Search = Record<string, string | string[] | undefined>;
const TONE = { ok: "ok", refused: "warn", error: "bad" } as const;

/** Every operator action, allowed or refused, newest first. Read-only: the table refuses edits. */
export default async function AuditPage({ searchParams }: { searchParams: Promise<Search> }) {
  await requirePageViewer("/audit");
  const raw = Object.fromEntries(Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== "")) as Record<string, string>;
  const parsed = auditFilterSchema.safeParse(raw);
  const { entries, nextBefore } = await listAudit(parsed.success ? parsed.data : {});
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>Audit log</h1>
          <p className="muted">Every operator action — who, role, what, on what, with which parameters, the result, when, from where. Entries cannot be changed or removed.</p>
        </div>
      </div>
      <form className="filters" method="get" role="search">
        <label className="field">
          Actor
          <input type="text" name="actor" defaultValue={raw.actor} placeholder="user name or anonymous" />
        </label>
        <label className="field">
          Action
          <input type="text" name="action" defaultValue={raw.action} placeholder="e.g. job.retry" />
        </label>
        <label className="field">
          Target
          <input type="text" name="target" defaultValue={raw.target} placeholder="job id" />
        </label>
        <label className="field">
          Result
          <select name="result" defaultValue={raw.result ?? ""}>
            <option value="">any</option>
            <option value="ok">ok</option>
            <option value="refused">refused</option>
            <option value="error">error</option>
          </select>
        </label>
        <button type="submit">Filter</button>
        <Link href="/audit" className="button secondary">
          Clear
        </Link>
      </form>
      {entries.length === 0 ? (
        <div className="panel empty">No entry matches.</div>
      ) : (
        <div className="table-wrap">
          <table className="data">
            <thead>
              <tr>
                <th>When</th>
                <th>Who</th>
                <th>Action</th>
                <th>Target</th>
                <th>Parameters</th>
                <th>Result</th>
                <th>From</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.id}>
                  <td className="small">{fmtTime(e.at)}</td>
                  <td>
                    {e.actor} {e.role ? <span className="muted small">({e.role})</span> : null}
                  </td>
                  <td className="mono">{e.action}</td>
                  <td className="mono small">{e.target ? (e.target.length === 36 ? <Link href={`/jobs/${e.target}`}>{e.target.slice(0, 8)}</Link> : e.target) : "—"}</td>
                  <td className="mono small">{e.params ? JSON.stringify(e.params) : "—"}</td>
                  <td>
                    <span className={`badge ${TONE[e.result]}`}>{e.result}</span>
                    <div className="small">{e.message}</div>
                  </td>
                  <td className="small">{e.clientAddress ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
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
