"use client";

import { QueryClient, QueryClientProvider, useQuery } from "@tanstack/react-query";
import { useState, useSyncExternalStore } from "react";
import type { Progress } from "@/lib/jobs/queries";
import { STATUS_LABEL } from "@/lib/jobs/statuses";
import { StatusBadge, statusTone } from "../../components/status-badge";
import { formatDurationRounded, formatWaitSeconds } from "@/lib/format/duration";
import { formatRate } from "@/lib/format/rate";
import { fmtAgo, fmtInt } from "../../components/format";
import { DataTable, num } from "../../components/data-table";

/** One query-options factory per polled resource; polling stops by itself once the job is terminal. */
export function progressQuery(token: string, initialData: Progress) {
  return {
    queryKey: ["progress", token],
    queryFn: async (): Promise<Progress> => {
      const response = await fetch(`/api/progress/${token}`, { cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return response.json();
    },
    initialData,
    refetchInterval: (query: { state: { data?: Progress } }) => (query.state.data?.terminal ? false : 1000),
    refetchIntervalInBackground: true,
    retry: true,
  };
}

/** What the "Time left" block says in large type. */
function timeLeftText(p: Progress): string {
  if (p.terminal) return "—";
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
  return at.toLocaleString(undefined, sameDay ? { hour: "2-digit", minute: "2-digit" } : { weekday: "short", hour: "2-digit", minute: "2-digit" });
}

const noSubscription = () => () => {};
/** False while the server renders and while the browser hydrates that render; true after. */
function useInBrowser(): boolean {
  return useSyncExternalStore(noSubscription, () => true, () => false);
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

function View({ token, initial }: { token: string; initial: Progress }) {
  const { data, isError, dataUpdatedAt } = useQuery(progressQuery(token, initial));
  const p = data ?? initial;
  const done = p.processed + p.failed;
  const pct = p.total ? Math.min(100, Math.round((done / p.total) * 100)) : 0;
  const waitingToStart = p.status === "queued";
  const nouns = `${p.noun}s`;
  const Nouns = nouns[0]!.toUpperCase() + nouns.slice(1);
  return (
    <>
      <div className="page-head" style={{ alignItems: "center" }}>
        <div>
          <h1>{p.title}</h1>
          <p className="muted small">Keep this page’s address to come back to it later.</p>
        </div>
        <StatusBadge status={p.status} />
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
              <span data-testid="processed">{fmtInt(p.processed)}</span> {p.noun === "row" ? "imported" : "done"}
            </span>
            <span className="muted small">
              {fmtInt(done)} of {p.total === null ? "?" : fmtInt(p.total)} {nouns} read
            </span>
          </div>
          <div>
            <span className="muted small">{Nouns} with problems</span>
            <span className="big" style={{ color: p.failed ? "var(--bad)" : undefined }} data-testid="failed">
              {fmtInt(p.failed)}
            </span>
          </div>
          <TimeLeft p={p} />
        </div>
        {p.message ? (
          <p className={`message ${statusTone(p.status)}`} data-testid="message">
            {p.message}
          </p>
        ) : !p.terminal ? (
          <p className="message info">{waitingToStart ? "Queued: it will start shortly." : `${STATUS_LABEL[p.status]}…`}</p>
        ) : null}
        <p className="small muted" style={{ marginBottom: 0 }}>
          {p.terminal ? "Finished. " : "Updates every second. "}
          Last updated {fmtAgo(new Date(dataUpdatedAt || Date.now()).toISOString())}
          {isError ? " — the connection is interrupted; retrying." : "."}
        </p>
      </section>
      {p.failures.length > 0 ? (
        <section className="panel">
          <h2>{Nouns} that could not be processed</h2>
          <p className="muted small">
            {p.failed > p.failures.length ? `The first ${p.failures.length} of ${fmtInt(p.failed)}. ` : ""}
            {p.noun === "row"
              ? "Row numbers count the header as row 1, as in a spreadsheet."
              : p.noun === "document"
                ? "Documents are numbered from 1 in the order you sent them."
                : `${Nouns} are numbered from 1 in the order they were processed.`}
          </p>
          <DataTable headings={[num(p.noun === "row" ? "Row" : Nouns.slice(0, -1)), "Problem"]} rows={p.failures} testId="failures">
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

export function ProgressView(props: { token: string; initial: Progress }) {
  const [client] = useState(() => new QueryClient());
  return (
    <QueryClientProvider client={client}>
      <View {...props} />
    </QueryClientProvider>
  );
}
