import Link from "next/link";
import { callListInProductionTime } from "@/lib/reports/production-time";
import { callListQuerySchema, listCalls, type CallList, type CallListQuery } from "@/lib/modelcalls/queries";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { requirePageViewer } from "@/lib/auth/principal";
import { PageHead } from "../../../components/page-head";
import { DataTable, num } from "../../../components/data-table";
import { JobLink } from "../../../components/job-link";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../../components/format";
import { OutcomeBadge } from "../../../components/outcome-badge";

export const dynamic = "force-dynamic";
export const metadata = { title: "Calls" };

type Search = Record<string, string | string[] | undefined>;

const TYPE_NOUN = { model: "model calls", ocr: "OCR calls", tool: "tool calls" } as const;

/** "2.2 s – 3.2 s", "under 15 ms", "53 min and more": a bucket's edges as the histogram's tooltip says them. */
function bucketRange(b: NonNullable<CallList["bucket"]>): string {
  if (b.bucket === 0) return `under ${formatDurationRounded(b.upperMs ?? 0)}`;
  if (b.upperMs === null) return `${formatDurationRounded(b.lowerMs)} and more`;
  return `${formatDurationRounded(b.lowerMs)} – ${formatDurationRounded(b.upperMs)}`;
}

/** What the list is of, in one sentence. */
function describe(q: ReturnType<typeof callListQuerySchema.parse>, list: CallList) {
  const what = q.type ? TYPE_NOUN[q.type] : "calls";
  const parts = [
    list.bucket ? `that took ${bucketRange(list.bucket)} (bucket ${list.bucket.bucket} of the histogram)` : null,
    q.kind ? `of ${q.kind} jobs` : null,
    q.queue ? `on queue ${q.queue}` : null,
    q.model ? `to ${q.model}` : null,
    q.from || q.to
      ? `started ${q.from ? `from ${fmtTime(q.from)}` : ""}${q.from && q.to ? " " : ""}${q.to ? `until ${fmtTime(q.to)}` : ""}`
      : null,
  ].filter(Boolean);
  return `${capitalise(what)} ${parts.join(", ")}`.trim();
}

export default async function CallsPage({ searchParams }: { searchParams: Promise<Search> }) {
  // Checked here, not only in the layout: a client navigation renders the page without it.
  await requirePageViewer("/model-calls");
  const raw = Object.fromEntries(
    Object.entries(await searchParams).filter(([, v]) => typeof v === "string" && v !== ""),
  ) as Record<string, string>;
  const parsed = callListQuerySchema.safeParse(raw);
  if (!parsed.success) {
    return (
      <main className="page">
        <PageHead title="Calls" description={<Link href="/model-calls">← Model calls</Link>} />
        <p className="form-error" role="alert">
          This list’s address was not understood:{" "}
          {parsed.error.issues.map((i) => `${i.path.join(".") || "query"}: ${i.message}`).join("; ")}. Open it again
          from a bar of the <Link href="/model-calls">latency histogram</Link> or from a job’s timeline.
        </p>
      </main>
    );
  }
  const q = parsed.data;
  const list = callListInProductionTime(await listCalls(q));
  const next: CallListQuery = { ...raw, after: list.nextAfter ?? undefined };
  const back = new URLSearchParams(
    Object.entries({ type: q.type, queue: q.queue, kind: q.kind, model: q.model }).filter(
      (e): e is [string, string] => !!e[1],
    ),
  );
  return (
    <main className="page">
      <PageHead
        title={q.job ? "Calls of one job" : q.bucket !== undefined ? "Calls in a latency bucket" : "Calls"}
        description={
          <>
            {q.job ? (
              <>
                Every call of job <JobLink id={q.job} /> (and of its parts, if it was split), newest first.
              </>
            ) : (
              <>{describe(q, list)}; newest first.</>
            )}{" "}
            <Link href={q.job ? `/jobs/${q.job}` : `/model-calls?${back}`}>
              {q.job ? "← The job’s timeline" : "← The histogram"}
            </Link>
          </>
        }
      />
      <section className="panel" aria-labelledby="calls-heading">
        <h2 id="calls-heading">
          <span data-testid="calls-total">{formatCount(list.total)}</span> {list.total === 1 ? "call" : "calls"}
          {q.after ? <span className="muted small"> (a later page)</span> : null}
        </h2>
        {list.bucket ? (
          <p className="small muted">
            The same calls the bar counts: latency {bucketRange(list.bucket)}, in the histogram’s window. Calls still
            running when the histogram was read are listed too once they finish.
          </p>
        ) : null}
        <DataTable
          headings={["Started (UTC)", num("Latency"), "Status", "Job", "Model", "Kind", num("Batch")]}
          rows={list.calls}
          empty="No calls match."
          testId="calls-table"
          label="Calls"
        >
          {(c) => (
            <tr key={c.id} data-outcome={c.outcome}>
              <td className="mono" style={{ fontSize: "0.85rem", whiteSpace: "nowrap" }}>
                {c.startedAt.replace("T", " ").slice(0, 23)}
              </td>
              <td className="num">{formatDuration(c.durationMs)}</td>
              <td>
                <OutcomeBadge outcome={c.outcome} />
              </td>
              <td>{c.jobId ? <JobLink id={c.jobId} /> : <span className="muted">—</span>}</td>
              <td>
                <span className="mono">{c.model}</span>
                {c.type !== "model" ? <span className="muted small"> ({c.type})</span> : null}
                {c.error ? (
                  <div className="small" style={{ color: "var(--bad)" }}>
                    {c.error}
                  </div>
                ) : null}
              </td>
              <td className="mono">{c.kind ?? "—"}</td>
              <td className="num">{formatCount(c.batchSize)}</td>
            </tr>
          )}
        </DataTable>
        {list.nextAfter ? (
          <div className="pager">
            <Link
              href={`/model-calls/calls?${new URLSearchParams(Object.entries(next).filter((e): e is [string, string] => typeof e[1] === "string"))}`}
              className="button secondary"
            >
              Older calls →
            </Link>
          </div>
        ) : null}
      </section>
    </main>
  );
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
