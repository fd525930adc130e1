import { operatorRoute } from "@/lib/http/operator";
import { getQueuesOverview } from "@/lib/queues/overview";

export const dynamic = "force-dynamic";

/** Operator: what the Queues page shows, per queue of the catalog. Changes nothing, so it is not audited. */
export const GET = operatorRoute({
  name: "GET /api/queues",
  run: () => getQueuesOverview(),
  describe: (overview) => ({ ok: true, status: 200, code: "ok", message: "", body: overview }),
});
