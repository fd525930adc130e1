import { withLinkedSignal } from "@/lib/core/linked-signal";
import type { FailoverPolicy, ModelProvider } from "@/lib/model-providers";
import { measuredLatency, type MeasuredLatency } from "@/lib/ratelimit/measured-latency";
import { sleep } from "@/lib/time";
import { CallSuperseded } from "./errors";

/**
 * Failover decided by the job's deadline: which provider of a route a call starts on, and when a
 * call still unanswered is sent again on the next provider. Each provider is judged by its own
 * recent answers (./../ratelimit/measured-latency.ts), the job by its soft deadline; without a
 * deadline, or before a provider's latency is measured, nothing is decided here and the call
 * fails over only while a provider is down (./chat-completion.ts).
 */

/** Real ms kept between a fallback's expected answer and the deadline: a commit and a busy machine. */
export const DEADLINE_MARGIN_MS = 250;

type Latencies = (provider: ModelProvider) => Promise<MeasuredLatency | null>;

const measured: Latencies = (provider) => measuredLatency(provider.service);

/**
 * The deadline failover decides by: the job's, under the policy `deadline`; none under `outage`
 * (a call leaves a provider only while it is down) or `never` (its route is one provider).
 */
export function decidingDeadline(policy: FailoverPolicy, deadlineAt: number | undefined): number | undefined {
  return policy === "deadline" ? deadlineAt : undefined;
}

/**
 * The first provider of the route worth asking: the first one, unless its median answer would
 * come after the deadline while a later one's would come before it — a provider too slow for
 * what is left is skipped for one that is not (the calls after it go on being judged alike).
 */
export async function firstInTime(
  route: readonly ModelProvider[],
  deadlineAt: number | undefined,
  now = Date.now(),
  latencies: Latencies = measured,
): Promise<{ index: number; skipped: { provider: string; p50Ms: number }[] }> {
  if (deadlineAt === undefined || route.length < 2) return { index: 0, skipped: [] };
  const left = deadlineAt - now - DEADLINE_MARGIN_MS;
  const skipped: { provider: string; p50Ms: number }[] = [];
  for (const [index, provider] of route.entries()) {
    const latency = await latencies(provider);
    if (latency === null || latency.p50Ms <= left || index === route.length - 1) return { index, skipped };
    skipped.push({ provider: provider.name, p50Ms: latency.p50Ms });
  }
  return { index: 0, skipped: [] };
}

/**
 * When a call still unanswered on a provider is sent again on `next` (real ms since the epoch):
 * the latest moment at which nine in ten of the next provider's answers still come before the
 * deadline (now, when that has passed). Null without a deadline or a measured next provider, or
 * when even its median answer would come too late: it is not sent again then, paid for nothing.
 */
export async function sendAgainAt(
  next: ModelProvider,
  deadlineAt: number | undefined,
  now = Date.now(),
  latencies: Latencies = measured,
): Promise<number | null> {
  if (deadlineAt === undefined) return null;
  const latency = await latencies(next);
  if (latency === null || deadlineAt - now - DEADLINE_MARGIN_MS < latency.p50Ms) return null;
  return Math.max(now, deadlineAt - latency.p90Ms - DEADLINE_MARGIN_MS);
}

/**
 * `call` on `provider`; if it has not answered by `at` (real ms since the epoch), the same call on
 * `next` beside it. The first answer is the call's; the other request is cancelled with
 * `CallSuperseded` (recorded `superseded`, never a failure). A failure waits for the other
 * request; both failing is the first one's failure. Without `at`, `call` on `provider` alone.
 */
export async function withSecondChance<T>(
  call: (provider: ModelProvider, signal: AbortSignal) => Promise<T>,
  route: { provider: ModelProvider; next: ModelProvider; at: number | null },
  signal: AbortSignal,
): Promise<T> {
  const { provider, next, at } = route;
  if (at === null) return call(provider, signal);
  const firstStop = new AbortController();
  const first = withLinkedSignal([signal, firstStop.signal], (s) => call(provider, s));
  const timerStop = new AbortController();
  const due = sleep(Math.max(0, at - Date.now()), timerStop.signal).then(
    () => true,
    () => false,
  );
  const sendAgain = await Promise.race([first.then(...NOT_DUE), due]);
  timerStop.abort();
  if (!sendAgain || signal.aborted) return first;
  const secondStop = new AbortController();
  const second = withLinkedSignal([signal, secondStop.signal], (s) => call(next, s));
  return new Promise<T>((resolve, reject) => {
    const failures: unknown[] = [];
    const settle = (request: Promise<T>, other: AbortController, answeredBy: string, index: number) =>
      request.then(
        (value) => {
          other.abort(new CallSuperseded(`cancelled: the same question was answered first by ${answeredBy}`));
          resolve(value);
        },
        (error: unknown) => {
          failures[index] = error;
          if (failures.filter((f) => f !== undefined).length === 2) reject(failures[0]);
        },
      );
    void settle(first, secondStop, provider.name, 0);
    void settle(second, firstStop, next.name, 1);
  });
}

/** Settled (either way) before the due time: not sent again. */
const NOT_DUE = [() => false, () => false] as const;
