import { type FailoverCeiling, modelRouting, type ModelProvider } from "@/lib/model-providers";
import { env } from "@/lib/env";
import { formatUsd } from "@/lib/format/number";
import { currentTenant } from "@/lib/ratelimit/context";
import { luaSource, runLua } from "@/lib/redis/lua";
import { key, redis } from "@/lib/redis/client";
import { DEFAULT_COMPLETION_ESTIMATE } from "@/lib/ratelimit/provider-tokens";
import { estimateCostUsd, type ModelPrices } from "./usage";

/**
 * The failover cost ceiling: what calls sent to a fallback provider (any provider of a route but
 * its first) may spend — per job, and per tenant per UTC day (lib/model-providers.ts
 * `FailoverCeiling`). Kept in Redis in micro-USD and shared by every worker process: before a call
 * goes to a fallback it reserves its estimated cost (its prompt counted, its answer estimated at
 * `DEFAULT_COMPLETION_ESTIMATE` tokens) in one script that refuses when the reservation would take
 * the job or the tenant past its ceiling — so calls in flight together never cross it — and it is
 * settled with the answer's tokens after (released when no answer came). A refused call does not
 * fail over: it waits for the provider before it, and the job's message says which ceiling.
 * Spend is kept a week for a job and two days for a tenant's day.
 */

/** Micro-USD: whole numbers, so Redis adds them exactly. */
const MICRO = 1_000_000;
const JOB_SPEND_TTL_S = 7 * 24 * 3600;
const TENANT_DAY_SPEND_TTL_S = 2 * 24 * 3600;

/**
 * Reserves `ARGV[1]` (micro-USD) on every key whose ceiling allows it, or on none: each key `i`
 * has its ceiling at `ARGV[2i]` and its time to live at `ARGV[2i+1]`. Returns `{1}`, or `{0, i,
 * spent}` for the first key the reservation would take past its ceiling.
 */
const RESERVE = luaSource(`
local estimate = tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  local spent = tonumber(redis.call('GET', k) or '0')
  if spent + estimate > tonumber(ARGV[2 * i]) then return {0, i, spent} end
end
for i, k in ipairs(KEYS) do
  redis.call('INCRBY', k, estimate)
  redis.call('EXPIRE', k, ARGV[2 * i + 1])
end
return {1}
`);

/** One ceiling a call is held to: its key, the ceiling, and the words for going past it, given what is spent. */
interface Scope {
  key: string;
  ceilingMicro: number;
  ttlS: number;
  past: (spent: string) => string;
}

/** A call's reservation, settled once with what it cost. */
export interface FailoverReservation {
  settle(costUsd: number): Promise<void>;
}

/** Failover refused: the fallback would take a job or a tenant past its ceiling. `why` is the sentence a person reads. */
export type FailoverSpendResult = { ok: true; reservation: FailoverReservation } | { ok: false; why: string };

/** The UTC day of `now`, `YYYY-MM-DD`. */
const dayOf = (now: Date) => now.toISOString().slice(0, 10);

/** The ceilings a call made for `jobId` (and the running tenant) is held to. */
function scopesOf(jobId: string | undefined, ceiling: FailoverCeiling, now: Date): Scope[] {
  const scopes: Scope[] = [];
  const { perJobUsd, perTenantDayUsd } = ceiling;
  if (jobId !== undefined && perJobUsd !== undefined)
    scopes.push({
      key: key("failover-spend", "job", jobId),
      ceilingMicro: Math.round(perJobUsd * MICRO),
      ttlS: JOB_SPEND_TTL_S,
      past: (spent) => `this job's fallback spend (${spent}) past its ceiling of ${formatUsd(perJobUsd)}`,
    });
  const tenantId = currentTenant();
  if (tenantId !== undefined && perTenantDayUsd !== undefined)
    scopes.push({
      key: key("failover-spend", "tenant", tenantId, dayOf(now)),
      ceilingMicro: Math.round(perTenantDayUsd * MICRO),
      ttlS: TENANT_DAY_SPEND_TTL_S,
      past: (spent) =>
        `its tenant's fallback spend today (${spent}, UTC) past its ceiling of ${formatUsd(perTenantDayUsd)} a day`,
    });
  return scopes;
}

const NOTHING_HELD: FailoverReservation = { settle: () => Promise.resolve() };

/**
 * Holds a fallback call's estimated cost against its job's and tenant's ceilings, or says why it
 * may not go. Without a ceiling that applies (none configured, or a call outside a job) it goes.
 */
export async function reserveFailover(
  provider: ModelProvider,
  promptTokens: number,
  jobId: string | undefined,
  ceiling: FailoverCeiling = modelRouting().ceiling,
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
  now = new Date(),
): Promise<FailoverSpendResult> {
  const scopes = scopesOf(jobId, ceiling, now);
  if (scopes.length === 0) return { ok: true, reservation: NOTHING_HELD };
  const estimateUsd = estimateCostUsd(provider.model, promptTokens, DEFAULT_COMPLETION_ESTIMATE, prices) ?? 0;
  const estimate = Math.ceil(estimateUsd * MICRO);
  const [ok, index, spent] = await runLua<[number, number?, number?]>(
    redis(),
    RESERVE,
    scopes.map((s) => s.key),
    [estimate, ...scopes.flatMap((s) => [s.ceilingMicro, s.ttlS])],
  );
  if (ok !== 1) {
    const scope = scopes[index! - 1]!;
    return {
      ok: false,
      why: `its fallback ${provider.name} is not asked: another call there (about ${formatUsd(estimate / MICRO)}) would take ${scope.past(`${formatUsd(spent! / MICRO)} so far, calls in flight included`)}`,
    };
  }
  return {
    ok: true,
    reservation: {
      settle: async (costUsd) => {
        const delta = Math.ceil(costUsd * MICRO) - estimate;
        if (delta === 0) return;
        const pipeline = redis().pipeline();
        for (const s of scopes) pipeline.incrby(s.key, delta);
        await pipeline.exec();
      },
    },
  };
}

/** What a fallback's answer cost, from its tokens as the provider counted them (0 without a price or usage). */
export function answerCostUsd(
  model: string,
  usage: { promptTokens?: number; completionTokens?: number },
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): number {
  return estimateCostUsd(model, usage.promptTokens ?? 0, usage.completionTokens ?? 0, prices) ?? 0;
}
