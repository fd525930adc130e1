"use client";

import { QueryClient, QueryClientProvider, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, useSyncExternalStore } from "react";
import type { CustomerProgress as Progress } from "@/lib/progress/customer-progress";
import { statusTone } from "../../components/status-badge";
import { formatDuration, formatDurationRounded, formatWaitSeconds } from "@/lib/format/duration";
import { formatRate } from "@/lib/format/rate";
import { formatCount } from "@/lib/format/number";
import { fmtAgo } from "../../components/format";
import { DataTable, num } from "../../components/data-table";

/**
 * Ended without finishing: the rest can still be resumed from where it stopped, and the page says
 * it updates when that happens, so it keeps looking, slowly.
 */
const RESUMABLE = new Set<string>(["timed_out", "killed", "failed", "abandoned"]);
const RESUMABLE_POLL_MS = 10_000;

/** How often the page asks: every second while the job runs, slowly while it may be resumed, never once it is done. */
function pollEvery(p: Progress | undefined): number | false {
  if (!p?.terminal) return 1000;
  return RESUMABLE.has(p.status) ? RESUMABLE_POLL_MS : false;
}

/** The answer this page holds, with its ETag: a poll asks "changed since?" and a 304 keeps it. */
interface Held {
  etag: string | null;
  data: Progress;
}

/**
 * One query-options factory per polled resource; polling stops by itself once the job is done for
 * good, and pauses while the stream delivers. Each poll is conditional (If-None-Match): an
 * unchanged answer comes back as an empty 304.
 */
export function progressQuery(token: string, held: Held, live: boolean) {
  return {
    queryKey: ["progress", token],
    queryFn: async (): Promise<Progress> => {
      const response = await fetch(`/api/progress/${token}`, {
        cache: "no-store",
        headers: held.etag ? { "If-None-Match": held.etag } : {},
      });
      if (response.status === 304) return held.data;
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      held.data = await response.json();
      held.etag = response.headers.get("etag");
      return held.data;
    },
    initialData: held.data,
    // The server rendered the current answer: no second look on mount; none on focus while streamed.
    refetchOnMount: false,
    refetchOnWindowFocus: !live,
    refetchOnReconnect: !live,
    refetchInterval: (query: { state: { data?: Progress } }) => (live ? false : pollEvery(query.state.data)),
    refetchIntervalInBackground: true,
    retry: true,
  };
}

/** A stream that has said nothing this long after opening is held up on the way (a buffering proxy): the page polls instead. */
const STREAM_SILENT_MS = 5_000;

/**
 * Server-sent events of this job's answer while it runs: each new version replaces the page's
 * data the moment it is committed. Tells `setLive` whether the stream is delivering; while it is
 * not (no EventSource, refused, dropped, silent) the page polls. The stream ends with the job.
 */
function useProgressStream(
  token: string,
  client: QueryClient,
  held: Held,
  running: boolean,
  setLive: (live: boolean) => void,
): void {
  useEffect(() => {
    if (!running || typeof EventSource === "undefined") {
      setLive(false);
      return;
    }
    // While it connects the page does not poll as well: the stream's first event is the answer.
    setLive(true);
    const source = new EventSource(`/api/progress/${token}/events`);
    let heard = false;
    const stop = () => {
      source.close();
      setLive(false);
    };
    const silent = setTimeout(() => heard || stop(), STREAM_SILENT_MS);
    const heardFrom = () => {
      heard = true;
      setLive(true);
    };
    source.addEventListener("ready", heardFrom);
    source.addEventListener("progress", (event) => {
      heardFrom();
      const data = JSON.parse((event as MessageEvent<string>).data) as Progress;
      held.data = data;
      held.etag = null;
      client.setQueryData(["progress", token], data);
      if (data.terminal) stop();
    });
    // Refused (429, 404) or closed for good: poll. Dropped: poll until the browser has reconnected it.
    source.onerror = () => (source.readyState === EventSource.CLOSED ? stop() : setLive(false));
    return () => {
      clearTimeout(silent);
      source.close();
    };
  }, [token, client, held, running, setLive]);
}

/** What the "Time left" block says in large type. */
function timeLeftText(p: Progress): string {
  if (p.terminal) return "—";
  // Its wake-up is only the next look at a service that is down: no time can be promised.
  if (p.waitsForService) return "when the service answers";
  if (p.waitSeconds !== undefined) return `waiting ${formatWaitSeconds(p.waitSeconds * 1000)}`;
  if (p.etaSeconds !== null) return `about ${formatDurationRounded(p.etaSeconds * 1000)} left`;
  if (p.status === "queued") return "waiting to start";
  if (p.total !== null && p.processed + p.failed >= p.total) return "finishing…";
  return "estimating…";
}

/**
 * A moment in the reader's own time zone, with the day when it is not today: "14:32", "Tue 09:15".
 * Only in the browser — the server does not know the reader's zone.
 */
function localClock(iso: string): string {
  const at = new Date(iso);
  const sameDay = at.toDateString() === new Date().toDateString();
  return at.toLocaleString(
    undefined,
    sameDay ? { hour: "2-digit", minute: "2-digit" } : { weekday: "short", hour: "2-digit", minute: "2-digit" },
  );
}

const noSubscription = () => () => {};
/** False while the server renders and while the browser hydrates that render; true after. */
function useInBrowser(): boolean {
  return useSyncExternalStore(
    noSubscription,
    () => true,
    () => false,
  );
}

/** The pace in words: measured from the job's recent work, or, before there is enough of it, what similar jobs manage. */
function paceText(rate: NonNullable<Progress["rate"]>, noun: string): string {
  const pace = formatRate(rate.perSecond, noun);
  return rate.basis === "measured" ? pace : `about ${pace}, from similar jobs`;
}

function TimeLeft({ p }: { p: Progress }) {
  const inBrowser = useInBrowser();
  const moving = !p.terminal && p.waitSeconds === undefined;
  return (
    <div>
      <span className="muted small">Time left</span>
      <span className="big" data-testid="time-left">
        {timeLeftText(p)}
      </span>
      {moving && p.expectedFinishAt && inBrowser ? (
        <span className="muted small" data-testid="expected-finish">
          expected by {localClock(p.expectedFinishAt)}
        </span>
      ) : null}
      {moving && p.rate ? (
        <span className="muted small" data-testid="rate">
          {paceText(p.rate, p.noun)}
        </span>
      ) : null}
    </div>
  );
}

function View({ token, initial, initialEtag }: { token: string; initial: Progress; initialEtag: string }) {
  const client = useQueryClient();
  const [held] = useState<Held>(() => ({ etag: initialEtag, data: initial }));
  const [live, setLive] = useState(false);
  const inBrowser = useInBrowser();
  const { data, isError, dataUpdatedAt } = useQuery(progressQuery(token, held, live));
  const p = data ?? initial;
  useProgressStream(token, client, held, !p.terminal, setLive);
  const done = p.processed + p.failed;
  const pct = p.total ? Math.min(100, Math.round((done / p.total) * 100)) : 0;
  const nouns = `${p.noun}s`;
  const Nouns = nouns[0]!.toUpperCase() + nouns.slice(1);
  return (
    <>
      <div className="page-head" style={{ alignItems: "center" }}>
        <div>
          <h1>{p.title}</h1>
          <p className="muted small">Keep this page’s address to come back to it later.</p>
        </div>
        {/* The customer's words for the status; the operators' labels stay on the job page. */}
        <span className={`badge ${statusTone(p.status)}`} data-status={p.status} data-testid="status">
          {p.statusLabel}
        </span>
      </div>
      <section className="panel" aria-labelledby="progress-heading">
        <h2 id="progress-heading" className="sr-only" style={{ position: "absolute", left: -9999 }}>
          Progress
        </h2>
        <div
          className={`bar ${p.terminal ? "" : "running"}`}
          role="progressbar"
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={pct}
          aria-label={`${pct} % done`}
        >
          <div className="done" style={{ width: `${p.total ? (p.processed / p.total) * 100 : 0}%` }} />
          <div className="failed" style={{ width: `${p.total ? (p.failed / p.total) * 100 : 0}%` }} />
        </div>
        <div className="progress-numbers" aria-live="polite">
          <div>
            <span className="muted small">Progress</span>
            <span className="big" data-testid="progress-percent">
              {pct} %
            </span>
          </div>
          <div>
            <span className="muted small">{Nouns} done</span>
            <span className="big">
              <span data-testid="processed">{formatCount(p.processed)}</span> {p.noun === "row" ? "imported" : "done"}
            </span>
            <span className="muted small">
              {formatCount(done)} of {p.total === null ? "?" : formatCount(p.total)} {nouns} read
            </span>
          </div>
          <div>
            <span className="muted small">{Nouns} with problems</span>
            <span className="big" style={{ color: p.failed ? "var(--bad)" : undefined }} data-testid="failed">
              {formatCount(p.failed)}
            </span>
          </div>
          <TimeLeft p={p} />
        </div>
        <p className={`message ${statusTone(p.status)}`} data-testid="message">
          {p.message}
        </p>
        {p.next ? (
          <p data-testid="next">
            <strong>What happens next: </strong>
            {p.next}
          </p>
        ) : null}
        {p.otherModels ? (
          <p className="small" data-testid="other-models">
            {p.otherModels}
          </p>
        ) : null}
        {p.serviceWaits?.map((w) => (
          <p key={w.from} className="small" data-testid="service-wait">
            {w.sentence}
          </p>
        ))}
        <p className="small muted" style={{ marginBottom: 0 }}>
          {/* Only a page that runs its script updates itself; without it, the refresh link says so. */}
          {p.terminal && !RESUMABLE.has(p.status)
            ? "Finished. "
            : !inBrowser
              ? ""
              : p.terminal
                ? `Stopped for now; checks for news every ${formatDuration(RESUMABLE_POLL_MS)}. `
                : live
                  ? "Updates as it happens. "
                  : "Updates every second. "}
          Last updated {fmtAgo(new Date(dataUpdatedAt || Date.now()).toISOString())}
          {isError ? " — the connection is interrupted; retrying." : "."}
        </p>
      </section>
      {p.removedByRetention ? (
        <p className="message info" role="note" data-testid="detail-removed">
          {p.removedByRetention}
        </p>
      ) : null}
      {p.downloads ? <Downloads downloads={p.downloads} failed={p.failed} processed={p.processed} /> : null}
      {p.failures.length > 0 ? (
        <section className="panel">
          <h2>
            {Nouns} that could not be {p.noun === "row" ? "imported" : "processed"}
          </h2>
          <p className="muted small">
            {p.failed > p.failures.length ? `The first ${p.failures.length} of ${formatCount(p.failed)}. ` : ""}
            {p.noun === "row"
              ? "Row numbers count the header as row 1, as in a spreadsheet."
              : p.noun === "document"
                ? "Documents are numbered from 1 in the order you sent them."
                : `${Nouns} are numbered from 1 in the order they were processed.`}
          </p>
          <DataTable
            headings={[num(p.noun === "row" ? "Row" : Nouns.slice(0, -1)), "Problem"]}
            rows={p.failures}
            testId="failures"
          >
            {(f) => (
              <tr key={f.row}>
                <td className="num">{f.row}</td>
                <td>{f.reason}</td>
              </tr>
            )}
          </DataTable>
        </section>
      ) : null}
    </>
  );
}

/** The import's files, once it has finished: what was imported, and what to fix and send again. */
function Downloads({
  downloads,
  processed,
  failed,
}: {
  downloads: NonNullable<Progress["downloads"]>;
  processed: number;
  failed: number;
}) {
  return (
    <section className="panel" aria-labelledby="downloads-heading">
      <h2 id="downloads-heading">Your files</h2>
      <ul style={{ listStyle: "none", padding: 0, margin: 0, display: "grid", gap: "0.75rem" }}>
        {downloads.result ? (
          <li>
            <a className="button" href={downloads.result} download data-testid="download-result">
              Download the imported rows (CSV)
            </a>
            <span className="muted small" style={{ display: "block", marginTop: "0.25rem" }}>
              {formatCount(processed)} {processed === 1 ? "row" : "rows"}, each with its category
            </span>
          </li>
        ) : null}
        {downloads.failedRows ? (
          <li>
            <a className="button secondary" href={downloads.failedRows} download data-testid="download-failed">
              Download the rows to fix (CSV)
            </a>
            <span className="muted small" style={{ display: "block", marginTop: "0.25rem" }}>
              {formatCount(failed)} {failed === 1 ? "row" : "rows"} as you sent them, with a reason column: fix them and
              upload this file again
            </span>
          </li>
        ) : null}
      </ul>
    </section>
  );
}

export function ProgressView(props: { token: string; initial: Progress; initialEtag: string }) {
  const [client] = useState(() => new QueryClient());
  return (
    <QueryClientProvider client={client}>
      <View {...props} />
    </QueryClientProvider>
  );
}
