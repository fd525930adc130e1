import { formatCount } from "@/lib/format/number";
import { formatWaitSeconds } from "@/lib/format/duration";
import type { BlockedBy } from "./blocked-by";

/**
 * Why a job waits, in its customer's words: the same facts as `BlockedBy` (./blocked-by.ts), told
 * without how the work is run (no queues, workers, tenants or slots: `OPERATOR_WORDS` of
 * lib/progress/customer-progress.ts, which a test holds these sentences to). Each sentence says only what
 * the running system does: what the job waits for, and whether it goes on by itself.
 */

/** What a customer calls their other jobs of a kind: "3 other files of yours". */
const THEIR_JOBS: Record<string, [one: string, many: string]> = {
  csv_import: ["file", "files"],
  bulk_ocr: ["batch of documents", "batches of documents"],
  agent_run: ["run", "runs"],
  overdue_invoices: ["check", "checks"],
  marketplace_sync: ["sync", "syncs"],
  card_generation: ["card", "cards"],
};

const clock = (iso: string) => `${iso.slice(11, 16)} UTC`;

/**
 * The customer's sentence for `b`. `now` and `timeScale` turn a known end into "about 47 s"
 * (production time, as the customer's page counts it).
 */
export function customerWaitSentence(b: BlockedBy, kind: string, now: Date = new Date(), timeScale = 1): string {
  const d = b.detail;
  switch (d.type) {
    case "queue_paused":
      return "Our team has paused this kind of work for the moment; yours starts as soon as they turn it back on. You do not need to send anything again.";
    case "no_worker":
      return "Waiting to start: the part of our service that does this work is not running right now. It starts as soon as it is back; you do not need to send anything again.";
    case "quota_empty":
      return "Your image generation allowance is used up: this card can only be made once more generations are added to your plan.";
    case "service_down":
      if (d.answersAgain)
        return "An outside service we rely on was not answering; it answers again, and this goes on by itself in a moment.";
      // It answers, refusing our requests: true of every request until the configuration is fixed.
      if (d.misconfigured)
        return `Waiting for an outside service we rely on, which has refused our requests since ${clock(b.since)}. It goes on by itself as soon as it accepts them again; you do not need to send anything again.`;
      return `Waiting for an outside service we rely on, which has not answered since ${clock(b.since)}. It goes on by itself as soon as the service answers again; you do not need to send anything again.`;
    case "tenant_share":
      return "Your other work is using your full share of a busy outside service right now, so this waits for some of it to finish; it goes on by itself.";
    case "provider_slots":
      return "Waiting for a busy outside service to free up; it goes on by itself.";
    case "rate_limit": {
      const what = d.family ? "the marketplace's rate limit" : "a busy outside service to free up";
      const ms = b.until ? Math.max(1_000, (Date.parse(b.until) - now.getTime()) / timeScale) : null;
      return ms === null
        ? `Waiting for ${what}; it goes on by itself.`
        : `Waiting ${formatWaitSeconds(ms)} for ${what}; it goes on by itself.`;
    }
    case "behind_jobs": {
      if (d.ahead === 0)
        return d.slots > d.busySlots
          ? "Starting in a moment."
          : "Next in line: it starts as soon as the work before it makes room.";
      const [one, many] = THEIR_JOBS[kind] ?? ["job", "jobs"];
      const own = d.aheadOwn ?? 0;
      const others = d.aheadOwn === null ? 0 : d.ahead - own;
      if (d.aheadOwn === null)
        return `Waiting for ${formatCount(d.ahead)} ${d.ahead === 1 ? "job" : "jobs"} ahead of it to go first; it goes on by itself.`;
      const yours = own > 0 ? `${formatCount(own)} other ${own === 1 ? one : many} of yours` : "";
      const theirs =
        others > 0
          ? `${formatCount(others)} ${own > 0 ? "" : others === 1 ? "job " : "jobs "}from other customers`
          : "";
      return `Waiting for ${[yours, theirs].filter(Boolean).join(" and ")} to go first; it starts right after.`;
    }
  }
}
