import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { ensureProgressListener } from "@/lib/progress/listener";
import { getProgressSnapshot, progressOf } from "@/lib/progress/snapshot";
import { ProgressView } from "./progress-view";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Progress", referrer: "no-referrer", robots: { index: false } };

/** Public: the token in the address is the only key, and it opens this one job. */
export default async function ProgressPage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  void ensureProgressListener();
  const snapshot = await getProgressSnapshot(token);
  if (!snapshot) notFound();
  return (
    <main className="narrow">
      <ProgressView token={token} initial={progressOf(snapshot)} initialEtag={snapshot.etag} />
      <noscript>
        <p className="small muted" data-testid="refresh">
          This page shows the progress as it was when it loaded. <a href={`/progress/${token}`}>Refresh the page</a> to
          see the latest.
        </p>
      </noscript>
    </main>
  );
}
