"use client";

import { QueryClient, QueryClientProvider, useQuery } from "@tanstack/react-query";
import { useState } from "react";
import type { Progress } from "@/lib/jobs/queries";
import { STATUS_LABEL } from "@/lib/jobs/statuses";
import { StatusBadge, statusTone } from "../../components/status-badge";
import { formatDurationRounded, formatWaitSeconds } from "@/lib/format/duration";
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
          <div>
            <span className="muted small">Time left</span>
            <span className="big">{p.terminal
                ? "—"
                : p.waitSeconds !== undefined
                  ? `waiting ${formatWaitSeconds(p.waitSeconds * 1000)}`
                  : p.etaSeconds !== null
                    ? `about ${formatDurationRounded(p.etaSeconds * 1000)}`
                    : waitingToStart
                      ? "waiting to start"
                      : "estimating…"}</span>
          </div>
        </div>
        {p.message ? (
          <p className={`message ${statusTone(p.status)}`} data-testid="message">
            {p.message}
          </p>
        ) : !p.terminal ? (
          <p className="message info">{waitingToStart ? "Queued: it will start shortly." : `${STATUS_LABEL[p.status]}…`}</p>
        ) : null}
        {p.children ? (
          <p className="small" data-testid="parts">
            Processed in {p.children.length} parts to fit the time each may take: {p.children.filter((c) => c.status === "completed" || c.status === "completed_with_errors").length} done
            {p.children.some((c) => c.status === "queued" || c.status === "running" || c.status === "delayed")
              ? `, ${p.children.filter((c) => c.status === "queued" || c.status === "running" || c.status === "delayed").length} in progress`
              : ""}
            . The numbers above count every part.
          </p>
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
