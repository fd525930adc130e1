import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { getCustomerProgress } from "@/lib/jobs/customer-progress";
import { ProgressView } from "./progress-view";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Progress", referrer: "no-referrer", robots: { index: false } };

/** Public: the token in the address is the only key, and it opens this one job. */
export default async function ProgressPage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  const initial = await getCustomerProgress(token);
  if (!initial) notFound();
  return (
    <main className="narrow">
      <ProgressView token={token} initial={initial} />
    </main>
  );
}
