"use client";

import { focusManager, type QueryClient, useQuery } from "@tanstack/react-query";
import { usePathname, useRouter } from "next/navigation";
import { useEffect, useRef, useSyncExternalStore, useTransition } from "react";
import { formatDuration } from "@/lib/format/duration";

/** How often a live page asks the server for a fresh render while the tab is visible. */
export const LIVE_INTERVAL_MS = 5_000;

/**
 * The pages that redraw themselves. Budgets (configuration and worker reports that change on a
 * deploy), database (each render samples for two seconds, and polling would show up in the very
 * statistics it reads) and audit (a record read deliberately, page by page) stay as loaded.
 */
const LIVE_PATHS: readonly RegExp[] = [
  /^\/$/,
  /^\/jobs$/,
  /^\/jobs\/[^/]+$/,
  /^\/stuck$/,
  /^\/queues$/,
  /^\/limiter$/,
  /^\/reserves$/,
  /^\/model-calls$/,
];

export const isLivePath = (path: string) => LIVE_PATHS.some((p) => p.test(path));

/** "12:03:04 UTC": the dashboard shows times in UTC everywhere. */
const clock = (ms: number) => `${new Date(ms).toISOString().slice(11, 19)} UTC`;

/** Why the health check failed, in words, from its JSON (`{ db, redis }`) when there is one. */
async function describeFailure(res: Response): Promise<string> {
  const body = (await res.json().catch(() => null)) as { db?: string; redis?: string } | null;
  const down = [body?.db === "down" ? "PostgreSQL" : null, body?.redis === "down" ? "Redis" : null].filter(Boolean);
  return down.length
    ? `${down.join(" and ")} ${down.length > 1 ? "are" : "is"} down`
    : `the server answered ${res.status}`;
}

/**
 * Whether a stream keeps the page at `path` current (the job page's, app/(ops)/jobs/[id]/job-live.tsx):
 * set by the page while its stream delivers, and the timer stands down meanwhile.
 */
export const liveStreamKey = (path: string) => ["live-stream", path] as const;

/** Redraws the page at `path` now, as the timer would (health check first, in a transition); joins one under way. */
export function refreshLivePage(client: QueryClient, path: string): Promise<void> {
  return client.refetchQueries({ queryKey: ["live-page", path] }, { cancelRefetch: false });
}

const subscribeFocus = (onChange: () => void) => focusManager.subscribe(onChange);
const isVisible = () => focusManager.isFocused();
const subscribeNothing = () => () => {};

/**
 * Keeps the operator page it sits on current: every few seconds (never while the tab is hidden,
 * and at once when it comes back) it re-renders the server page in a transition, so the old page
 * stays on screen until the new one is ready and client state — what is typed in a form — is kept.
 * Says when the data was last brought up to date, or why it could not be.
 */
export function LiveRefresh() {
  const path = usePathname();
  if (!isLivePath(path)) return null;
  // A new page starts with its own clock: its data is as fresh as the navigation that drew it.
  return <LiveStatus key={path} path={path} />;
}

/** Says when the page's data was last brought up to date, or why it could not be; refreshes it meanwhile. */
function LiveStatus({ path }: { path: string }) {
  const refresh = useCommittedRefresh();
  const visible = useSyncExternalStore(subscribeFocus, isVisible, () => true);
  const mounted = useSyncExternalStore(
    subscribeNothing,
    () => true,
    () => false,
  );

  const streamed = useQuery<boolean>({
    queryKey: liveStreamKey(path),
    queryFn: () => false,
    enabled: false,
    initialData: false,
  }).data;

  const query = useLivePage(path, streamed, refresh);

  const updatedAt = query.data;
  const state = query.isError ? "error" : visible ? "live" : "paused";
  return (
    // A named region: every piece of the page sits in a landmark, for those who move by them.
    <section className="live-bar" aria-label="Page refresh">
      <p
        className={`live-status ${state}`}
        data-testid="live-status"
        data-state={state}
        data-mode={streamed ? "stream" : "poll"}
        data-updated-at={updatedAt}
      >
        <span className="live-dot" aria-hidden="true" />
        {state === "error" ? (
          <span role="alert">
            {/* One string: JSX text broken after its semicolon reads to the linter as a stray statement end. */}
            {`Could not refresh: ${query.error?.message ?? ""}. Showing data from ${mounted ? clock(updatedAt) : "page load"}; retrying every ${formatDuration(LIVE_INTERVAL_MS)}.`}
          </span>
        ) : (
          <span>
            Updated {mounted ? clock(updatedAt) : "just now"} ·{" "}
            {state !== "live"
              ? "paused while hidden"
              : streamed
                ? "live, as the job changes"
                : `live, every ${formatDuration(LIVE_INTERVAL_MS)}`}
          </span>
        )}
      </p>
    </section>
  );
}

/**
 * Re-renders the server page in a transition: the promise it returns settles once the new page is
 * committed (or this component is gone).
 */
function useCommittedRefresh(): () => Promise<void> {
  const router = useRouter();
  const [pending, startTransition] = useTransition();
  // Resolvers of the refreshes waiting for their transition to commit.
  const committed = useRef<(() => void)[]>([]);
  useEffect(() => {
    if (!pending) for (const done of committed.current.splice(0)) done();
  }, [pending]);
  // A refresh left unresolved would hold the query "fetching" and block every later one.
  useEffect(
    () => () => {
      for (const done of committed.current.splice(0)) done();
    },
    [],
  );
  return () =>
    new Promise<void>((resolve) => {
      committed.current.push(resolve);
      startTransition(() => router.refresh());
    });
}

/** The page's refresh, as a query whose data is when it was last brought up to date: on a timer unless a stream keeps it. */
function useLivePage(path: string, streamed: boolean, refresh: () => Promise<void>) {
  return useQuery({
    queryKey: ["live-page", path],
    queryFn: async () => {
      // A refresh whose request fails makes the router fall back to a full page load, which would
      // replace the page with the browser's error screen: ask the (cheap, public) health check first.
      const res = await fetch("/api/health", { cache: "no-store", signal: AbortSignal.timeout(10_000) }).catch(
        () => null,
      );
      if (!res) throw new Error("the server cannot be reached");
      if (!res.ok) throw new Error(await describeFailure(res));
      await refresh();
      return Date.now();
    },
    initialData: () => Date.now(),
    // The interval refetches while visible; the interval is also how long a render counts as
    // fresh, so coming back to the tab refreshes only when the page is older than that.
    staleTime: LIVE_INTERVAL_MS,
    // While a stream tells of every change, no timer: the stream's owner asks for redraws.
    refetchInterval: streamed ? false : LIVE_INTERVAL_MS,
    refetchIntervalInBackground: false,
    refetchOnWindowFocus: true,
    refetchOnReconnect: true,
  });
}
