import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ModelProvider } from "@/lib/model-providers";
import { breakerKey, breakers } from "@/lib/ratelimit/breaker";
import { isOutsideServiceDown } from "@/lib/ratelimit/errors";
import { forgetMeasuredLatencies } from "@/lib/ratelimit/measured-latency";
import { silenceKeys } from "@/lib/ratelimit/silence";
import { processMetrics } from "@/lib/metrics/metrics";
import { closeRedis, redis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { chatCompletion } from "./chat-completion";
import type { ModelCallRecord } from "./record";
import { randomUUID } from "node:crypto";
import type { FailoverCeiling } from "@/lib/model-providers";
import { runAsTenant } from "@/lib/ratelimit/context";
import { DEFAULT_COMPLETION_ESTIMATE } from "@/lib/ratelimit/provider-tokens";
import { key } from "@/lib/redis/client";
import { countPromptTokens } from "./tokens";

// The fallback priced at USD 1,000 per million tokens (a tenth of a cent a token): its calls' cost
// tells the failover cost ceiling's arithmetic apart from rounding.
const PRICES = {
  "bounded-sim-1": { prompt: 0.15, completion: 0.6 },
  "bounded-sim-backup-1": { prompt: 1_000, completion: 1_000 },
};

/**
 * Failover on a route of two model providers (the simulators' two, through the official OpenAI
 * client), against real Redis: each provider its own breaker, the call going to the fallback
 * while the primary is down, and back to the primary once a probe finds it answering.
 */

let sim: RunningSimulators;
beforeAll(async () => {
  sim = await startSimulators({
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, apiKey: "sk-primary" },
    backupModel: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, apiKey: "sk-backup" },
  });
});
afterAll(async () => {
  await clearBreakers();
  await sim.close();
  await closeRedis();
});

const SERVICES = ["model", "model:backup"] as const;
async function clearBreakers() {
  await redis().del(...SERVICES.flatMap((s) => [breakerKey(s), ...silenceKeys(s, breakerKey(s)).slice(0, 4)]));
}
beforeEach(async () => {
  await clearBreakers();
  forgetMeasuredLatencies();
});
afterEach(async () => {
  await sim.faults.setSilent("model", false);
  await sim.faults.setSlowdown("model", 1);
});

/** `count` answered calls of `ms` each, as the service's silence detection keeps them (real ms). */
async function measured(service: "model" | "model:backup", ms: number, count = 20) {
  await redis().lpush(silenceKeys(service, breakerKey(service))[3]!, ...Array.from({ length: count }, () => ms));
}

const primary = (apiKey = "sk-primary"): ModelProvider => ({
  name: "primary",
  service: "model",
  baseUrl: sim.modelBaseUrl,
  apiKey,
  model: "bounded-sim-1",
  concurrency: 4,
  rps: 1_000,
  tpm: undefined,
});
const backup = (): ModelProvider => ({
  name: "backup",
  service: "model:backup",
  baseUrl: sim.backupModelBaseUrl,
  apiKey: "sk-backup",
  model: "bounded-sim-backup-1",
  concurrency: 4,
  rps: 1_000,
  tpm: undefined,
});

/** `bounded_model_failovers_total` for csv_import from the primary to the fallback, for `reason`. */
async function failovers(reason: string): Promise<number> {
  const { values } = await processMetrics().registry.getSingleMetric("bounded_model_failovers_total")!.get();
  return values
    .filter(
      (v) =>
        v.labels.kind === "csv_import" &&
        v.labels.from === "primary" &&
        v.labels.to === "backup" &&
        v.labels.reason === reason,
    )
    .reduce((n, v) => n + v.value, 0);
}

const stateOf = async (service: string) => (await redis().hget(breakerKey(service as "model"), "state")) ?? "closed";

const QUESTION = [{ role: "user" as const, content: "REWE Markt, weekly shop" }];

function ask(
  route: ModelProvider[],
  recorded: ModelCallRecord[] = [],
  deadlineAt?: number,
  ceiling?: { jobId: string; failoverCeiling: FailoverCeiling },
) {
  return chatCompletion({
    route,
    deadlineAt,
    messages: QUESTION,
    signal: new AbortController().signal,
    context: { queue: "imports", jobKind: "csv_import", jobId: ceiling?.jobId },
    failoverCeiling: ceiling?.failoverCeiling,
    prices: PRICES,
    record: async (call) => void recorded.push(call),
  });
}

describe("failover to the next provider on a call's route (real Redis, two simulated providers)", () => {
  it("a misconfigured primary: the call is answered by the fallback at once, and so are the calls after it (the primary asked again only by a probe after its cool-down)", async () => {
    const recorded: ModelCallRecord[] = [];
    const down = await failovers("down");
    const first = await ask([primary("sk-wrong"), backup()], recorded);
    expect(await failovers("down")).toBe(down + 1);
    expect(first).toMatchObject({ provider: "backup", model: "bounded-sim-backup-1" });
    // Its own breaker: the primary's misconfigured, the fallback's closed.
    expect(await stateOf("model")).toBe("misconfigured");
    expect(await stateOf("model:backup")).toBe("closed");
    expect(recorded.map((r) => [r.model, r.outcome])).toEqual([
      ["bounded-sim-1", "error"],
      ["bounded-sim-backup-1", "ok"],
    ]);
    // While it is misconfigured no call goes to the primary (a probe goes after each cool-down: 30
    // ms at this time scale, so the next call may be one, refused and answered by the fallback too).
    const admitted = await redis().hget(breakerKey("model"), "until");
    const second = await ask([primary("sk-wrong"), backup()], recorded);
    expect(second.provider).toBe("backup");
    const primaryAsked = recorded.slice(2).filter((r) => r.model === "bounded-sim-1");
    expect(primaryAsked.length).toBeLessThanOrEqual(Date.now() >= Number(admitted) ? 1 : 0);
    expect(primaryAsked.every((r) => r.outcome === "error")).toBe(true);
  });

  it("a route of one provider never fails over: its call waits for the provider (the outage), whatever else answers", async () => {
    const recorded: ModelCallRecord[] = [];
    const error = await ask([primary("sk-wrong")], recorded).catch((e: unknown) => e);
    expect(isOutsideServiceDown(error)).toBe(true);
    expect(recorded.map((r) => r.model)).toEqual(["bounded-sim-1"]);
  });

  it("a silent primary: the calls out there are cut when its breaker opens and answered by the fallback; once a probe finds the primary answering, new calls go to it again", async () => {
    await sim.faults.setSilent("model", true);
    const recorded: ModelCallRecord[] = [];
    // Two calls: one alone past the threshold is the long tail, two are silence (lib/ratelimit/silence.ts).
    const during = await Promise.all([ask([primary(), backup()], recorded), ask([primary(), backup()], recorded)]);
    expect(during.map((r) => r.provider)).toEqual(["backup", "backup"]);
    // Each request to the primary cut as the outage, each to the fallback answered: two answers, each paid once.
    expect(recorded.map((r) => [r.model, r.outcome]).sort()).toEqual([
      ["bounded-sim-1", "error"],
      ["bounded-sim-1", "error"],
      ["bounded-sim-backup-1", "ok"],
      ["bounded-sim-backup-1", "ok"],
    ]);
    const opened = (await breakers().read()).find((b) => b.service === "model")!;
    expect(opened.state).toBe("open");
    expect(opened.error).toMatch(/^not answering/);

    await sim.faults.setSilent("model", false);
    await waitFor(async () => Date.now() >= opened.probeAt!.getTime(), {
      timeoutMs: 10_000,
      what: "the cool-down is over",
    });
    const after = await ask([primary(), backup()]);
    expect(after.provider).toBe("primary");
    expect((await breakers().read()).find((b) => b.service === "model")).toMatchObject({ state: "closed" });
  });

  it("by the deadline: a primary whose answers come after what is left of the job's budget is skipped for the fallback", async () => {
    await measured("model", 5_000);
    await measured("model:backup", 5);
    const recorded: ModelCallRecord[] = [];
    const slow = await failovers("slow");
    const answer = await ask([primary(), backup()], recorded, Date.now() + 1_000);
    expect(answer.provider).toBe("backup");
    expect(await failovers("slow")).toBe(slow + 1);
    expect(recorded.map((r) => r.model)).toEqual(["bounded-sim-backup-1"]);
    // With time enough, the primary as usual.
    expect((await ask([primary(), backup()], [], Date.now() + 60_000)).provider).toBe("primary");
  });

  it("by the deadline: a call still unanswered when the fallback could only just answer in time is sent there too; the first answer is kept and the primary's request recorded superseded", async () => {
    await measured("model", 5);
    await measured("model:backup", 5);
    // The primary now takes 5 s a call (1 ms × 5,000); the job has 1.5 s.
    await sim.faults.setSlowdown("model", 5_000);
    const recorded: ModelCallRecord[] = [];
    const sentAgain = await failovers("deadline");
    const started = Date.now();
    const answer = await ask([primary(), backup()], recorded, started + 1_500);
    const tookMs = Date.now() - started;
    expect(answer.provider).toBe("backup");
    expect(await failovers("deadline")).toBe(sentAgain + 1);
    // Sent again at the deadline less the fallback's p90 and the margin: about 1.2 s in, answered before the deadline.
    expect(tookMs).toBeGreaterThanOrEqual(1_200);
    expect(tookMs).toBeLessThan(1_500);
    await waitFor(async () => recorded.length === 2, { timeoutMs: 5_000, what: "both requests recorded" });
    expect(recorded.map((r) => [r.model, r.outcome]).sort()).toEqual([
      ["bounded-sim-1", "superseded"],
      ["bounded-sim-backup-1", "ok"],
    ]);
    // Without a deadline nothing is sent twice: the primary's answer, however slow.
    await sim.faults.setSlowdown("model", 500);
    const plain: ModelCallRecord[] = [];
    expect((await ask([primary(), backup()], plain)).provider).toBe("primary");
    expect(plain.map((r) => r.model)).toEqual(["bounded-sim-1"]);
  });

  describe("the failover cost ceiling", () => {
    /** What one fallback call reserves before it goes: its prompt and the completion estimate, at a tenth of a cent a token. */
    const estimateUsd = (countPromptTokens(QUESTION) + DEFAULT_COMPLETION_ESTIMATE) / 1_000;
    const spentMicro = async (...parts: string[]) => Number(await redis().get(key("failover-spend", ...parts)));

    it("per job: a call whose fallback would take the job past its ceiling does not fail over — it waits for the primary, and says which ceiling", async () => {
      const jobId = randomUUID();
      // Room for one call's estimate, not for a second beside what the first spent.
      const failoverCeiling = { perJobUsd: estimateUsd + 0.001, perTenantDayUsd: undefined };
      const recorded: ModelCallRecord[] = [];
      const first = await ask([primary("sk-wrong"), backup()], recorded, undefined, { jobId, failoverCeiling });
      expect(first.provider).toBe("backup");
      // Settled with the answer's tokens as the provider counted them, not the estimate.
      const answered = recorded.find((r) => r.outcome === "ok")!;
      const costMicro = (answered.promptTokens! + answered.completionTokens!) * 1_000;
      expect(await spentMicro("job", jobId)).toBe(costMicro);
      expect(costMicro).toBeLessThan(estimateUsd * 1_000_000);

      const down = await failovers("down");
      const refused = await ask([primary("sk-wrong"), backup()], recorded, undefined, { jobId, failoverCeiling }).catch(
        (e: unknown) => e,
      );
      expect(isOutsideServiceDown(refused)).toBe(true);
      expect((refused as Error).message).toMatch(
        /^The model service is down since .*its fallback backup is not asked: another call there \(about \$0\.2\d\d\) would take this job's fallback spend \(\$0\.0\d\d so far, calls in flight included\) past its ceiling of \$0\.\d{3}/,
      );
      // Nothing sent to the fallback, nothing counted as a failover, nothing more spent.
      expect(recorded.filter((r) => r.model === "bounded-sim-backup-1")).toHaveLength(1);
      expect(await failovers("down")).toBe(down);
      expect(await spentMicro("job", jobId)).toBe(costMicro);
      // Another job has a ceiling of its own.
      const other = await ask([primary("sk-wrong"), backup()], [], undefined, { jobId: randomUUID(), failoverCeiling });
      expect(other.provider).toBe("backup");
    });

    it("per tenant per day: once a tenant's fallback calls reach its ceiling, its other jobs wait too; another tenant's go on", async () => {
      const failoverCeiling = { perJobUsd: undefined, perTenantDayUsd: estimateUsd + 0.001 };
      const tenant = randomUUID();
      const asTenant = (id: string) =>
        runAsTenant(id, () =>
          ask([primary("sk-wrong"), backup()], [], undefined, { jobId: randomUUID(), failoverCeiling }),
        );
      expect((await asTenant(tenant)).provider).toBe("backup");
      const refused = await asTenant(tenant).catch((e: unknown) => e);
      expect(isOutsideServiceDown(refused)).toBe(true);
      expect((refused as Error).message).toMatch(
        /would take its tenant's fallback spend today \(\$0\.0\d\d so far, calls in flight included, UTC\) past its ceiling of \$0\.\d{3} a day/,
      );
      expect(await spentMicro("tenant", tenant, new Date().toISOString().slice(0, 10))).toBeGreaterThan(0);
      expect((await asTenant(randomUUID())).provider).toBe("backup");
    });
  });
});
