import { operatorRoute } from "@/lib/http/operator";
import { describePause, resumeQueue } from "@/lib/queues/pause";

export const dynamic = "force-dynamic";

/** Operator: resume a paused queue. The API twin of the Queues page's Resume; idempotent, audited. */
export const POST = operatorRoute({
  name: "POST /api/queues/:queue/resume",
  action: "queue.resume",
  target: (_input, { queue }: { queue: string }) => queue.slice(0, 100),
  run: (_input, { params }) => resumeQueue(params.queue),
  describe: describePause,
});
