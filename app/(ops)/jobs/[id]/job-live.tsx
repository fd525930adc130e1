"use client";

import { focusManager, type QueryClient, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { formatDurationRounded } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import { formatRate } from "@/lib/format/rate";
import type { JobFacts } from "@/lib/progress/operator";
import { fmtOutOf } from "../../../components/format";
import { liveStreamKey, refreshLivePage } from "../../../components/live-refresh";
import { StatusBadge } from "../../../components/status-badge";

/** The facts the page was rendered with, and when (server clock, ms): the stream's win once they are newer. */
export type RenderedFacts = Omit<JobFacts, "version">;

/** At most one redraw of the whole page per this long while the stream announces changes. */
export const REDRAW_EVERY_MS = 2_000;
/** Waits before opening a stream again after it was refused or closed: doubling from the first to the last. */
const BACKOFF_MS = { first: 2_000, last: 60_000 } as const;

const factsKey = (jobId: string) => ["job-facts", jobId] as const;

/** The newer of what the server rendered and what the stream delivered. */
function useFacts(jobId: string, rendered: RenderedFacts): RenderedFacts {
  const { data } = useQuery<JobFacts | null>({
    queryKey: factsKey(jobId),
    queryFn: () => null,
    enabled: false,
    initialData: null,
  });
  return data && data.at > rendered.at ? data : rendered;
}

/**
 * Follows the job while it runs, on its operator stream (`GET /api/jobs/:id/events`, the snapshot the
 * customer's page follows): status, counts, pace and time left are drawn the moment a version
 * arrives; everything else on the page (timeline, attempt, model calls, message) is redrawn by a
 * refresh of the page, at most once every `REDRAW_EVERY_MS`, only when the version changed. While
 * the stream delivers, the page's timer stands down; while it does not (refused, dropped, ended) the
 * timer polls, and the stream is tried again with a growing wait.
 */
export function JobStream({ jobId, follow }: { jobId: string; follow: boolean }) {
  const client = useQueryClient();
  useEffect(() => {
    if (!follow || typeof EventSource === "undefined") return;
    return followJobStream(client, jobId);
  }, [client, jobId, follow]);
  return null;
}

/** Opens the job's stream, and again after it was refused or closed; returns what closes it for good. */
function followJobStream(client: QueryClient, jobId: string): () => void {
  const path = `/jobs/${jobId}`;
  const setOpen = (open: boolean) => client.setQueryData(liveStreamKey(path), open);
  let source: EventSource | undefined;
  let reopen: ReturnType<typeof setTimeout> | undefined;
  const redraw = pageRedraws(client, path);
  let seen = 0;
  let wait: number = BACKOFF_MS.first;
  let ended = false;

  const open = () => {
    const s = new EventSource(`/api/jobs/${jobId}/events`);
    source = s;
    s.addEventListener("ready", () => {
      wait = BACKOFF_MS.first;
      setOpen(true);
    });
    s.addEventListener("progress", (event) => {
      wait = BACKOFF_MS.first;
      const facts = JSON.parse((event as MessageEvent<string>).data) as JobFacts;
      client.setQueryData(factsKey(jobId), facts);
      if (facts.terminal) {
        // The stream ends with the job: the page redraws now and polls from here on.
        ended = true;
        s.close();
        setOpen(false);
        redraw.soon(true);
        return;
      }
      setOpen(true);
      // The first version is the one the page was just drawn from; a later one is news.
      if (seen !== 0 && facts.version !== seen) redraw.soon();
      seen = facts.version;
    });
    s.onerror = () => {
      setOpen(false);
      // Dropped: the browser reconnects by itself. Refused or closed: try again later, waiting longer each time.
      if (s.readyState !== EventSource.CLOSED || ended) return;
      reopen = setTimeout(open, wait);
      wait = Math.min(BACKOFF_MS.last, wait * 2);
    };
  };
  open();
  return () => {
    ended = true;
    clearTimeout(reopen);
    redraw.cancel();
    source?.close();
    setOpen(false);
  };
}

/** Redraws of the page at `path`: at most one per `REDRAW_EVERY_MS` (or one now), none while hidden or mid-refresh. */
function pageRedraws(client: QueryClient, path: string): { soon: (now?: boolean) => void; cancel: () => void } {
  let redraw: ReturnType<typeof setTimeout> | undefined;
  let lastRedraw = Date.now();
  const soon = (now = false) => {
    if (redraw !== undefined && !now) return;
    clearTimeout(redraw);
    redraw = setTimeout(
      () => {
        redraw = undefined;
        // A hidden tab is redrawn when it is shown again (the page counts as stale by then).
        if (!focusManager.isFocused()) return;
        // A refresh under way was asked before this change: ask again when it is done.
        if (isRefreshing(client, path)) return soon();
        lastRedraw = Date.now();
        void refreshLivePage(client, path);
      },
      now ? 0 : Math.max(250, lastRedraw + REDRAW_EVERY_MS - Date.now()),
    );
  };
  return { soon, cancel: () => clearTimeout(redraw) };
}

function isRefreshing(client: QueryClient, path: string): boolean {
  return client.getQueryState(["live-page", path])?.fetchStatus === "fetching";
}

/** The status badge of the heading, as the stream last said. */
export function LiveJobStatus({ jobId, rendered }: { jobId: string; rendered: RenderedFacts }) {
  const facts = useFacts(jobId, rendered);
  return <StatusBadge status={facts.status} />;
}

/** The progress bar and counts, with the pace and the time left while it runs (production time at any scale). */
export function LiveJobProgress({
  jobId,
  rendered,
  attempt,
  noun,
  timeScale,
}: {
  jobId: string;
  rendered: RenderedFacts;
  attempt: number;
  noun: string;
  timeScale: number;
}) {
  const f = useFacts(jobId, rendered);
  const done = f.processed + f.failed;
  const pct = f.total ? Math.min(100, (done / f.total) * 100) : 0;
  const running = f.status === "running";
  return (
    <>
      <div className={`bar ${running ? "running" : ""}`} aria-hidden="true">
        <div className="done" style={{ width: `${f.total ? (f.processed / f.total) * 100 : 0}%` }} />
        <div className="failed" style={{ width: `${f.total ? (f.failed / f.total) * 100 : 0}%` }} />
      </div>
      <div className="progress-numbers">
        <div>
          <span className="muted small">Done</span>
          <span className="big" data-testid="job-done">
            {fmtOutOf(done, f.total)}
          </span>
          <span className="muted small">{pct.toFixed(0)} %</span>
        </div>
        <div>
          <span className="muted small">Applied</span>
          <span className="big">{formatCount(f.processed)}</span>
        </div>
        <div>
          <span className="muted small">Failed items</span>
          <span className="big" style={{ color: f.failed ? "var(--bad)" : undefined }}>
            {formatCount(f.failed)}
          </span>
        </div>
        <div>
          <span className="muted small">Attempt</span>
          <span className="big">{attempt}</span>
        </div>
      </div>
      {running && (f.perSecond !== null || f.etaSeconds !== null) ? (
        <p className="small muted" data-testid="job-pace">
          {f.etaSeconds !== null
            ? `About ${formatDurationRounded((f.etaSeconds * 1000) / timeScale)} left`
            : "Time left not known yet"}
          {f.perSecond !== null ? `, at ${formatRate(f.perSecond * timeScale, noun)}` : ""}.
        </p>
      ) : null}
    </>
  );
}
