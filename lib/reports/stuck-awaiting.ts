import { listAwaitingOperator } from "@/lib/diagnosis/awaiting-operator";

/** Jobs that wait on an operator (lib/diagnosis/awaiting-operator.ts), counted for the gauge. */

/** For the `bounded_jobs_awaiting_operator{kind}` gauge. */
export async function countAwaitingOperatorByKind(now = new Date()): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const j of await listAwaitingOperator(now)) counts[j.kind] = (counts[j.kind] ?? 0) + 1;
  return counts;
}
