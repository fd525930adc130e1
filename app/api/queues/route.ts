import { mostCommonCauses } from "@/lib/diagnosis/blocked-by";
import { operatorRoute } from "@/lib/http/operator";
import { getQueuesOverview } from "@/lib/queues/overview";

export const dynamic = "force-dynamic";

/**
 * Operator: what the Queues page shows, per queue of the catalog — with `waitingFor`, the most
 * common reason its queued and delayed jobs wait now (from a sample, as the page says). Changes
 * nothing, so it is not audited.
 */
export const GET = operatorRoute({
  name: "GET /api/queues",
  run: async () => {
    const [overview, causes] = await Promise.all([getQueuesOverview(), mostCommonCauses()]);
    const byQueue = new Map(causes.map(({ queue, ...cause }) => [queue, cause]));
    return { ...overview, queues: overview.queues.map((q) => ({ ...q, waitingFor: byQueue.get(q.queue) ?? null })) };
  },
  describe: (overview) => ({ ok: true, status: 200, code: "ok", message: "", body: overview }),
});
