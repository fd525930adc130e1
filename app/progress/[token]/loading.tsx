import { Skeleton } from "../../components/skeleton";

/** Shown while the progress is read: the page's shape (title, progress bar, numbers) and a status a screen reader announces. */
export default function ProgressLoading() {
  return (
    <main className="narrow" aria-busy="true">
      <div className="page-head" style={{ alignItems: "center" }}>
        <div style={{ width: "min(100%, 24rem)" }}>
          <h1 role="status">Loading progress …</h1>
          <Skeleton width="70%" />
        </div>
      </div>
      <section className="panel" aria-hidden="true">
        <div className="bar" />
        <div className="progress-numbers">
          {[0, 1, 2, 3].map((i) => (
            <div key={i} style={{ width: "6rem" }}>
              <Skeleton width="80%" />
              <Skeleton kind="value" width="70%" />
            </div>
          ))}
        </div>
        <Skeleton width="50%" />
      </section>
    </main>
  );
}
