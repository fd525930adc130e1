import Link from "next/link";
import type { CallStats, EventCategory, JobForensics, TimelineEntry } from "@/lib/reports/forensics";
import { formatDuration } from "@/lib/format/duration";
import { Stat } from "../../../components/stat";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../../components/format";
import { DataTable, num } from "../../../components/data-table";
import { OutcomeBadge } from "../../../components/outcome-badge";

const TYPE_NOUN: Record<string, string> = { model: "model call", ocr: "OCR call", tool: "tool call" };
const noun = (type: string, n: number) => `${TYPE_NOUN[type] ?? `${type} call`}${n === 1 ? "" : "s"}`;

const CATEGORY: Record<EventCategory, { label: string; tone: string }> = {
  attempt: { label: "attempt", tone: "info" },
  reschedule: { label: "rescheduled", tone: "warn" },
  reaper: { label: "reaped", tone: "bad" },
  event: { label: "event", tone: "idle" },
};

/** Not `small`: on a phone a small cell is given room for prose, and this one holds twelve characters. */
const TIME_CELL = { fontSize: "0.85rem", whiteSpace: "nowrap" } as const;

/** "12:00:03.412": calls of one batch start milliseconds apart; the date is in the row's title. */
const clock = (iso: string) => iso.slice(11, 23);

/** The call type the summary leads with: model calls when there are any. */
function lead(calls: CallStats[]): CallStats | null {
  return calls.find((c) => c.type === "model") ?? calls.find((c) => c.type === "ocr") ?? calls[0] ?? null;
}

/** The job's calls and runs at a glance: what the timeline below shows row by row. */
export function ForensicsSummary({ f }: { f: JobForensics }) {
  const main = lead(f.calls);
  const others = f.calls.filter((c) => c !== main);
  return (
    <section className="panel" aria-labelledby="forensics-heading">
      <h2 id="forensics-heading">Calls and runs</h2>
      <div className="grid cols-4" data-testid="forensics-summary">
        <Stat
          label={main ? capitalise(noun(main.type, 2)) : "Calls"}
          value={formatCount(main?.calls ?? 0)}
          stat="calls"
          alert={(main?.errors ?? 0) > 0}
        >
          <div className="small muted">
            {main
              ? `${formatCount(main.errors)} ${main.errors === 1 ? "error" : "errors"}, ${formatCount(main.aborted)} aborted, ${
                  main.superseded > 0
                    ? `${formatCount(main.superseded)} superseded (sent twice, the other answered), `
                    : ""
                }${formatCount(main.items)} items answered`
              : "none recorded"}
          </div>
        </Stat>
        <Stat
          label="Latency p50 / max"
          value={main ? `${formatDuration(main.p50Ms)} / ${formatDuration(main.maxMs)}` : "—"}
          stat="latency"
        >
          <div className="small muted">exact, over every call of the job</div>
        </Stat>
        <Stat label="Reschedules" value={formatCount(f.reschedules)} stat="reschedules">
          <div className="small muted">waits with the worker slot given back (rate limits, outages, a batch)</div>
        </Stat>
        <Stat label="Attempts" value={formatCount(f.attempts)} stat="attempts" alert={f.reaped > 0}>
          <div className="small muted">
            {f.reaped > 0
              ? `started afresh (a resume after a wait goes on with its attempt); reaped ${formatCount(f.reaped)}×`
              : "started afresh (a resume after a wait goes on with its attempt)"}
          </div>
        </Stat>
      </div>
      {others.length > 0 ? (
        <p className="small muted" style={{ margin: "0.75rem 0 0" }}>
          Also{" "}
          {others
            .map(
              (c) =>
                `${formatCount(c.calls)} ${noun(c.type, c.calls)} (p50 ${formatDuration(c.p50Ms)}, max ${formatDuration(c.maxMs)}, ${formatCount(c.errors)} ${c.errors === 1 ? "error" : "errors"})`,
            )
            .join("; ")}
          .
        </p>
      ) : null}
    </section>
  );
}

function Row({ e, jobId }: { e: TimelineEntry; jobId: string }) {
  const part = e.kind !== "earlier_calls" && e.part !== null ? <span className="muted">part {e.part} · </span> : null;
  if (e.kind === "earlier_calls") {
    return (
      <tr data-entry="earlier-calls">
        <td className="mono" style={TIME_CELL} title={fmtTime(e.at)}>
          {clock(e.at)}
        </td>
        <td>
          <span className="badge idle">{formatCount(e.calls)} earlier calls</span>
        </td>
        <td colSpan={4}>
          {formatCount(e.calls)} calls ({formatCount(e.errors)} {e.errors === 1 ? "error" : "errors"}) made from{" "}
          {clock(e.at)} until {clock(e.until)} are counted in the summary, not listed here.{" "}
          <Link href={`/model-calls/calls?job=${jobId}`}>List every call</Link>
        </td>
      </tr>
    );
  }
  if (e.kind === "event") {
    const c = CATEGORY[e.category];
    return (
      <tr data-entry="event" data-category={e.category} data-type={e.type}>
        <td className="mono" style={TIME_CELL} title={fmtTime(e.at)}>
          {clock(e.at)}
        </td>
        <td>
          {part}
          <span className={`badge ${c.tone}`}>{e.category === "event" ? e.type.replaceAll("_", " ") : c.label}</span>
          <div className="small muted">attempt {e.attempt}</div>
        </td>
        <td colSpan={4}>{e.message}</td>
      </tr>
    );
  }
  return (
    <tr data-entry="call" data-outcome={e.outcome}>
      <td className="mono" style={TIME_CELL} title={fmtTime(e.at)}>
        {clock(e.at)}
      </td>
      <td>
        {part}
        {TYPE_NOUN[e.type] ?? e.type}
      </td>
      <td className="num" data-cell="latency">
        {formatDuration(e.durationMs)}
      </td>
      <td>
        <OutcomeBadge outcome={e.outcome} />
      </td>
      <td className="num">{formatCount(e.batchSize)}</td>
      <td>
        <span className="mono">{e.model}</span>
        {e.error ? (
          <div className="small" style={{ color: "var(--bad)" }}>
            {e.error}
          </div>
        ) : null}
      </td>
    </tr>
  );
}

/**
 * A job's timeline: its events and calls in time order —
 * the latest calls one by one, earlier ones counted in one line that links to the full list.
 */
export function Timeline({ f }: { f: JobForensics }) {
  const first = f.entries[0]?.at;
  return (
    <section className="panel" aria-labelledby="timeline-heading" data-testid="timeline">
      <h2 id="timeline-heading">Timeline: attempts and events, with the job’s calls</h2>
      <p className="muted small">
        Oldest first; times in UTC{first ? `, from ${fmtTime(first)}` : ""}.{" "}
        {f.callsTotal > f.callsShown
          ? `The latest ${formatCount(f.callsShown)} of ${formatCount(f.callsTotal)} calls are listed one by one. `
          : ""}
        {f.callsTotal > 0 ? (
          <Link href={`/model-calls/calls?job=${f.jobId}`}>All {formatCount(f.callsTotal)} calls, newest first →</Link>
        ) : null}
      </p>
      <DataTable
        headings={["Time", "What", num("Latency"), "Status", num("Batch"), "Details"]}
        rows={f.entries}
        empty="Nothing has happened to this job yet."
        testId="timeline-table"
        label="Timeline"
        after={
          f.eventsTruncated ? (
            <p className="small muted" style={{ padding: "0 0.75rem" }}>
              Only the first events are shown.
            </p>
          ) : null
        }
      >
        {(e, i) => <Row key={i} e={e} jobId={f.jobId} />}
      </DataTable>
      <p className="small muted" style={{ marginBottom: 0 }}>
        Batch: the items one call answered (rows of a batched prompt). The job’s model tokens are under Details.
      </p>
    </section>
  );
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
