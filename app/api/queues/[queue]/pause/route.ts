import { operatorRoute } from "@/lib/http/operator";
import { describePause, pauseQueue } from "@/lib/queues/pause";

export const dynamic = "force-dynamic";

/** Operator: pause a queue (running jobs finish, nothing new starts). The API twin of the Queues page's Pause; idempotent, audited. */
export const POST = operatorRoute({
  name: "POST /api/queues/:queue/pause",
  action: "queue.pause",
  target: (_input, { queue }: { queue: string }) => queue.slice(0, 100),
  run: (_input, { principal, params }) => pauseQueue(params.queue, principal),
  describe: describePause,
});
