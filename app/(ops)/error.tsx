"use client";

import Link from "next/link";
import { useEffect, useState } from "react";

/**
 * An operations page whose server rendering failed (an unexpected error, not a missing row —
 * those are `notFound()`). Says what usually causes it and what to check, and offers a retry
 * that reads the data again. The error's details stay in the server log: a page never shows a
 * stack, and in production the browser only receives the error's digest, which is shown so the
 * log entry can be found. Since the browser cannot see the server's error, it asks /api/health
 * which dependency is down and, when one is, says so in plain words: the usual cause during an
 * outage, when the page fails at once (the server's timeouts are short) instead of hanging.
 */
export default function OpsError({ error, retry }: { error: unknown; retry: () => void }) {
  const down = useDownDependency();
  const digest =
    typeof error === "object" && error !== null && "digest" in error && typeof error.digest === "string"
      ? error.digest
      : null;
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>This page could not be loaded</h1>
          {down ? (
            <p data-testid="dependency-down">
              <strong>
                {down === "db"
                  ? "The database is not reachable right now; try again in a minute."
                  : "Redis (the queues) is not reachable right now; try again in a minute."}
              </strong>{" "}
              Running jobs pause and continue by themselves when it is back.
            </p>
          ) : null}
          <p className="muted">
            Reading its data failed on the server. Jobs and workers are not affected by this page failing.
          </p>
        </div>
      </div>
      <section className="panel" role="alert">
        <p style={{ marginTop: 0 }}>
          Usually PostgreSQL or Redis did not answer in time. <a href="/api/health">/api/health</a> says which
          dependency is down; if both are up, the web process&rsquo;s log has the error
          {digest ? (
            <>
              {" "}
              under the reference <code data-testid="error-digest">{digest}</code>
            </>
          ) : null}
          .
        </p>
        <div style={{ display: "flex", gap: "0.75rem", alignItems: "center", flexWrap: "wrap" }}>
          <button type="button" onClick={() => retry()}>
            Try again
          </button>
          <Link className="button secondary" href="/">
            Go to the overview
          </Link>
        </div>
      </section>
    </main>
  );
}

/** "db" or "redis" when /api/health says that dependency is down; null while unknown or when both are up. */
function useDownDependency(): "db" | "redis" | null {
  const [down, setDown] = useState<"db" | "redis" | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    fetch("/api/health", { cache: "no-store", signal: controller.signal })
      .then((res) => res.json() as Promise<{ db?: string; redis?: string }>)
      .then((h) => setDown(h.db === "down" ? "db" : h.redis === "down" ? "redis" : null))
      .catch(() => undefined);
    return () => controller.abort();
  }, []);
  return down;
}
