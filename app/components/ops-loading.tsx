import { Skeleton } from "./skeleton";

/**
 * The loading state of every operations page (each segment's `loading.tsx` is this). Each page has
 * its own boundary rather than one for the whole area, so that a job page whose job does not
 * exist is decided (404) before anything streams.
 *
 * Shown while an operations page reads its data: the page's shape (title, headline numbers, a
 * table) so the layout does not jump, and a status a screen reader announces. The navigation
 * above stays usable, so a slow page never traps the on-call engineer.
 */
export function OpsLoading() {
  return (
    <main className="page" aria-busy="true">
      <div className="page-head">
        <div style={{ width: "min(100%, 28rem)" }}>
          <h1 role="status">Loading …</h1>
          <Skeleton width="80%" />
        </div>
      </div>

      <section className="grid cols-4" aria-hidden="true">
        {[0, 1, 2, 3].map((i) => (
          <div className="stat" key={i}>
            <Skeleton width="60%" />
            <Skeleton kind="value" />
          </div>
        ))}
      </section>

      <section className="panel" style={{ marginTop: "1.25rem" }} aria-hidden="true">
        <Skeleton width="30%" />
        {[0, 1, 2, 3, 4, 5].map((i) => (
          <Skeleton kind="row" key={i} />
        ))}
      </section>
    </main>
  );
}
