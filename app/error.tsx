"use client";

import { usePathname } from "next/navigation";
import OpsError from "./(ops)/error";

/** Pages a customer reads: their failure never speaks of databases, queues or the overview. */
const CUSTOMER_PATHS = ["/upload", "/progress", "/documents"];

/**
 * A page whose server rendering failed above the operations pages' own boundary — the sign-in
 * check of their layout, which reads the database, fails first during an outage. Operations pages
 * get `app/(ops)/error.tsx` (it says which dependency is down); a customer's page gets a plain
 * "try again in a minute".
 */
export default function RootError({ error, retry }: { error: unknown; retry: () => void }) {
  const path = usePathname() ?? "/";
  if (!CUSTOMER_PATHS.some((p) => path === p || path.startsWith(`${p}/`)))
    return <OpsError error={error} retry={retry} />;
  return (
    <main className="page">
      <div className="page-head">
        <div>
          <h1>This page is not available right now</h1>
          <p>We could not load it just now. Nothing you uploaded is lost; please try again in a minute.</p>
        </div>
      </div>
      <section className="panel" role="alert">
        <button type="button" onClick={() => retry()}>
          Try again
        </button>
      </section>
    </main>
  );
}
