import { guardCall } from "@/lib/ratelimit/breaker";
import type { OutsideService } from "@/lib/ratelimit/breaker-services";
import { sendTracked } from "@/lib/ratelimit/silence";

/**
 * Other callers of `service` getting answers, every `everyMs`, until the returned stop is called:
 * the service is alive, so a call of a job that it leaves unanswered is that call's long tail, not
 * the service's silence (lib/ratelimit/silence.ts). Each is a real guarded call through the breaker
 * and the silence registry in Redis; only the request itself is answered in process.
 */
export function answeringService(service: OutsideService, everyMs = 20): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await guardCall(service, () =>
        sendTracked(
          `test: another caller of the ${service} service`,
          async () => "answered",
          () => true,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}
