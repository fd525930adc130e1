import { notFound } from "next/navigation";
import type { ReactNode } from "react";
import { getProgressSnapshot } from "@/lib/progress/snapshot";

/**
 * Decides "no such job" before anything streams: the segment's loading state starts the response,
 * and a not-found found only inside the page would then go out with status 200.
 */
export default async function ProgressLayout({
  children,
  params,
}: {
  children: ReactNode;
  params: Promise<{ token: string }>;
}) {
  if (!(await getProgressSnapshot((await params).token))) notFound();
  return children;
}
