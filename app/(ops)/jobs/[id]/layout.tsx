import { notFound } from "next/navigation";
import type { ReactNode } from "react";
import { jobExists } from "@/lib/job-views/queries";

/**
 * Decides "no such job" before anything streams: the operator area's loading state starts the
 * response, and a not-found found only inside the page would then go out with status 200.
 */
export default async function JobLayout({
  children,
  params,
}: {
  children: ReactNode;
  params: Promise<{ id: string }>;
}) {
  if (!(await jobExists((await params).id))) notFound();
  return children;
}
