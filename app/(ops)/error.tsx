"use client";

import Link from "next/link";

/**
 * An operations page whose server rendering failed (an unexpected error, not a missing row —
 * those are `notFound()`). Says what usually causes it and what to check, and offers a retry
 * that reads the data again. The error's details stay in the server log: a page never shows a
 * stack, and in production the browser only receives the error's digest, which is shown so the
 * log entry can be found.
 */
export default function OpsError({ error, retry }: { error: unknown; retry: () => void }) {
  const digest = typeof error === "object" && error !== null && "digest" in error && typeof error.digest === "string" ? error.digest : null;
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>This page could not be loaded</h1>
          <p className="muted">Reading its data failed on the server. Jobs and workers are not affected by this page failing.</p>
        </div>
      </div>
      <section className="panel" role="alert">
        <p style={{ marginTop: 0 }}>
          Usually PostgreSQL or Redis did not answer in time. <a href="/api/health">/api/health</a> says which dependency is down; if both are up, the web
          process&rsquo;s log has the error
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
