"use client";

/**
 * The progress page could not be read. Written for the person waiting on the work: it goes on
 * regardless, and a retry usually succeeds. The details stay in the server log; the
 * reference (the error's digest) lets support find them.
 */
export default function ProgressError({ error, retry }: { error: unknown; retry: () => void }) {
  const digest =
    typeof error === "object" && error !== null && "digest" in error && typeof error.digest === "string"
      ? error.digest
      : null;
  return (
    <main className="narrow">
      <h1>We could not show the progress just now</h1>
      <section className="panel" role="alert">
        <p style={{ marginTop: 0 }}>
          Nothing is lost: the work goes on in the background, and this page shows where it stands as soon as it loads
          again. Please try again in a moment.
        </p>
        <button type="button" onClick={() => retry()}>
          Try again
        </button>
        {digest ? (
          <p className="small muted" style={{ marginBottom: 0 }}>
            If this keeps happening, contact support and mention the reference <code>{digest}</code>.
          </p>
        ) : null}
      </section>
    </main>
  );
}
