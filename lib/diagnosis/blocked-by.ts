import { formatCount } from "@/lib/format/number";
import { z } from "zod";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatDuration } from "@/lib/format/duration";
import { BUCKETS, isFamily, parseProviderScope, parseScope, type LimitedProvider } from "@/lib/ratelimit/buckets";
import { readBreakers, type BreakerReading } from "@/lib/ratelimit/breaker";
import { OUTSIDE_SERVICES, serviceName, type OutsideService } from "@/lib/ratelimit/breaker-services";
import { providerLimiter, providerWaitersKey, type ProviderState } from "@/lib/ratelimit/provider";
import { kindSpec, QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import { livePresences } from "@/lib/queues/presence";
import { pausedQueues, type PauseInfo } from "@/lib/queues/pause";
import { queue } from "@/lib/queues/queues";
import { redis } from "@/lib/redis/client";

/**
 * Why a job that is not running is not running: one answer, from the live state, for the job API
 * (`blockedBy`), the job page's sentence, the customer's page (./blocked-by-customer.ts words the
 * same facts for them) and the Queues page's "most common cause now".
 *
 * Where each fact comes from (nothing here is stored for this purpose; it is read as it is now):
 * - `queue_paused`: BullMQ's paused flag and who paused it (lib/queues/pause.ts);
 * - `no_worker`: the live workers' presence keys, the same that readiness reads (lib/queues/overview.ts);
 * - `quota_empty`: the tenant's image pack (`QuotaPack.remaining`), for kinds that spend it;
 * - `service_down`: the circuit breaker of the kind's outside service (lib/ratelimit/breaker.ts);
 * - `tenant_share`, `provider_slots`, `rate_limit`: for a job waiting in *delayed*, the deferral's
 *   own record (the row's `wakeUpAt` and the scope its message names, written by
 *   lib/runs/reschedule.ts), then the provider's slots now (lib/ratelimit/provider.ts: holders per
 *   tenant, waiting tenants, the fair share of provider-slots.lua);
 * - `behind_jobs`: the job's place in BullMQ's line (the plain wait list is served first, then the
 *   prioritized set by score — lib/queues/fairness.ts), and whose jobs are ahead (the Job table).
 *
 * Precedence, when several hold — the first cause that would still hold after every later one went
 * away, so the sentence names what must change first:
 * 1. `queue_paused`: a person stopped the queue; nothing else moves the job until they resume it.
 * 2. `no_worker`: no process takes jobs of this queue; every other cause is moot until one runs.
 * 3. `quota_empty`: the run would be refused at its start; only a grant moves it, however long it waits.
 * 4. `service_down`: the run would give its slot back at once; it resumes by itself when a probe succeeds.
 * 5. `tenant_share` > `provider_slots` > `rate_limit` (a delayed job's deferral): the more specific
 *    reason first — a tenant at its fair share waits for its own calls, not just for a full provider.
 * 6. `behind_jobs`: nothing is wrong; it waits for its turn (also a delayed job whose wake-up has
 *    passed: it is back in line).
 * A job that is neither queued nor delayed is not blocked: `null`.
 */

export const BLOCKED_BY_TYPES = [
  "queue_paused",
  "no_worker",
  "quota_empty",
  "service_down",
  "tenant_share",
  "provider_slots",
  "rate_limit",
  "behind_jobs",
] as const;
export type BlockedByType = (typeof BLOCKED_BY_TYPES)[number];

/** Each cause in a few words, for the operators' pages. */
export const BLOCKED_BY_LABEL: Record<BlockedByType, string> = {
  queue_paused: "the queue is paused",
  no_worker: "no live worker serves the queue",
  quota_empty: "the tenant's image pack is used up",
  service_down: "an outside service is down",
  tenant_share: "the tenant holds its fair share of provider slots",
  provider_slots: "every provider slot is taken",
  rate_limit: "a rate-limit window",
  behind_jobs: "their turn in line",
};

/** The facts behind each type, for the customer's words and for the API's callers. */
export type BlockedByDetail =
  | { type: "queue_paused"; queue: string; pausedBy: string }
  | { type: "no_worker"; queue: string }
  | { type: "quota_empty"; packSize: number }
  | {
      type: "service_down";
      service: OutsideService;
      serviceName: string;
      error: string | null;
      answersAgain: boolean;
      misconfigured: boolean;
    }
  | {
      type: "tenant_share";
      provider: LimitedProvider;
      held: number;
      share: number;
      concurrency: number;
      tenants: number;
    }
  | { type: "provider_slots"; provider: LimitedProvider; inFlight: number; concurrency: number }
  | { type: "rate_limit"; window: string; family: string | null }
  | {
      type: "behind_jobs";
      queue: string;
      /** Jobs served before this one. */
      ahead: number;
      /** Of those, jobs of the same tenant; null when not counted (a sample on the Queues page). */
      aheadOwn: number | null;
      /** The other tenants with jobs ahead, most first (at most 5); empty when not counted. */
      aheadOthers: { tenant: string; jobs: number }[];
      /** Worker slots of the queue: busy now, and in all (live workers). */
      busySlots: number;
      slots: number;
    };

export interface BlockedBy {
  type: BlockedByType;
  /** One sentence for the operator. */
  message: string;
  /** Since when this cause holds (ISO). */
  since: string;
  /** When it is expected to end, if known (ISO): the wake-up of a deferral, the breaker's next probe. */
  until?: string;
  detail: BlockedByDetail;
}

/** What several jobs' answers share, read once (the Queues page asks for many jobs at once). */
export interface LiveState {
  now: Date;
  paused: Map<string, PauseInfo>;
  /** Queue → worker slots of the live workers that consume it (absent: none). */
  slots: Map<string, { workers: number; slots: number }>;
  breakers: BreakerReading[] | null;
  /** A provider's slots, read on first need (only a job deferred for a provider asks) and then shared. */
  provider(provider: LimitedProvider): Promise<ProviderSnapshot | null>;
}

interface ProviderSnapshot extends Pick<ProviderState, "inFlight" | "inFlightByTenant" | "concurrency"> {
  /** Tenants recorded as waiting for a slot (provider-slots.lua's waiters, not yet expired). */
  waiting: string[];
}

/** The row fields the answer needs. */
export interface BlockedRow {
  id: string;
  kind: string;
  queue: string;
  tenantId: string;
  status: string;
  message: string | null;
  createdAt: Date;
  heartbeatAt: Date | null;
  wakeUpAt: Date | null;
  queueJobId: string | null;
}

const blockedRowSelect = {
  id: true,
  kind: true,
  queue: true,
  tenantId: true,
  status: true,
  message: true,
  createdAt: true,
  heartbeatAt: true,
  wakeUpAt: true,
  queueJobId: true,
} as const;

async function readProvider(provider: LimitedProvider): Promise<ProviderSnapshot | null> {
  try {
    const state = await providerLimiter().peek(provider);
    const [sec, micro] = await redis().time();
    const now = Number(sec) * 1000 + Number(micro) / 1000;
    const waiting = await redis().zrangebyscore(providerWaitersKey(provider), now.toFixed(3), "+inf");
    return {
      inFlight: state.inFlight,
      inFlightByTenant: state.inFlightByTenant,
      concurrency: state.concurrency,
      waiting,
    };
  } catch {
    // Unreadable: the provider causes are then not claimed (the job falls back to its deferral's window).
    return null;
  }
}

/** Reads the state every answer shares: pauses, worker slots, breakers, provider slots. */
export async function readLiveState(now: Date = new Date()): Promise<LiveState> {
  const [paused, presences, breakers] = await Promise.all([pausedQueues(), livePresences(), readBreakers()]);
  const providers = new Map<LimitedProvider, Promise<ProviderSnapshot | null>>();
  const slots = new Map<string, { workers: number; slots: number }>();
  for (const p of presences) {
    for (const q of p.queues) {
      const s = slots.get(q) ?? { workers: 0, slots: 0 };
      slots.set(q, { workers: s.workers + 1, slots: s.slots + p.concurrency });
    }
  }
  const provider = (p: LimitedProvider) => {
    if (!providers.has(p)) providers.set(p, readProvider(p));
    return providers.get(p)!;
  };
  return { now, paused, slots, breakers, provider };
}

const OPEN_WAITING = new Set(["queued", "delayed"]);
const clock = (d: Date) => `${d.toISOString().slice(11, 19)} UTC`;
const plural = (n: number, one: string, many = `${one}s`) => `${formatCount(n)} ${n === 1 ? one : many}`;
const isUuid = (s: string) => z.uuid().safeParse(s).success;

/** The service a kind's calls go to, when a breaker guards it. */
function serviceOf(kind: string): OutsideService | null {
  const provider = kindSpec(kind)?.provider;
  return provider && (OUTSIDE_SERVICES as readonly string[]).includes(provider) ? (provider as OutsideService) : null;
}

/**
 * The scope a delayed job waits for, from its deferral's message ("Waiting 47 s for
 * statistics:tenant-42 (…)"): lib/runs/reschedule.ts writes it and it is the only record of it.
 */
export function deferralScope(message: string | null): string | null {
  const m = message ? / for ([a-z][a-z0-9_-]*:[^\s()]+) \(/i.exec(message) : null;
  return m?.[1] ?? null;
}

/** "the marketplace's statistics limit (1 request per 60 s per tenant)", "the model provider's request rate". */
function windowName(scope: string): { window: string; family: string | null } {
  const provider = parseProviderScope(scope);
  if (provider) return { window: `the ${provider} provider's request rate (${scope})`, family: null };
  const parsed = parseScope(scope);
  if (parsed && isFamily(parsed.family)) {
    const b = BUCKETS[parsed.family];
    return {
      window: `the marketplace's ${parsed.family} limit, ${plural(b.refillPerWindow, "request")} per ${formatDuration(b.windowMs)} per tenant (${scope})`,
      family: parsed.family,
    };
  }
  return { window: scope, family: null };
}

async function placeInLine(
  row: BlockedRow,
  live: LiveState,
  whose: boolean,
): Promise<BlockedByDetail & { type: "behind_jobs" }> {
  const q = queue(row.queue as QueueName);
  const id = row.queueJobId ?? row.id;
  const client = redis();
  const [waitLength, rank, active] = await Promise.all([
    client.llen(q.toKey("wait")),
    client.zrank(q.toKey("prioritized"), id),
    q.getActiveCount(),
  ]);
  // On the plain wait list (a stalled job put back) it is served before every prioritized job.
  const inWait = rank === null ? await client.lpos(q.toKey("wait"), id) : null;
  const ahead = rank !== null ? waitLength + rank : inWait !== null ? waitLength - 1 - inWait : waitLength;
  const slots = live.slots.get(row.queue) ?? { workers: 0, slots: 0 };
  const base = { type: "behind_jobs" as const, queue: row.queue, ahead, busySlots: active, slots: slots.slots };
  if (!whose || ahead === 0) return { ...base, aheadOwn: whose ? 0 : null, aheadOthers: [] };
  // Whose: the first 1,000 ahead are read (a line longer than that is described by its head).
  const CAP = 1_000;
  const [plain, prioritized] = await Promise.all([
    client.lrange(q.toKey("wait"), 0, CAP - 1),
    rank !== null && rank > 0
      ? client.zrange(q.toKey("prioritized"), "0", String(Math.min(rank, CAP) - 1))
      : Promise.resolve([] as string[]),
  ]);
  const ids = [...plain.filter((x) => x !== id), ...prioritized].slice(0, CAP);
  // Counted per tenant in the database (one grouped read, by primary key), slugs for the top five only.
  const counts = await db().$queryRaw<{ tenantId: string; n: number }[]>`
    SELECT "tenantId"::text AS "tenantId", count(*)::int AS n FROM "Job"
    WHERE id = ANY(${ids.filter(isUuid)}::uuid[]) OR "queueJobId" = ANY(${ids.filter((x) => !isUuid(x))}::text[])
    GROUP BY 1`;
  // A line longer than what was read: its head's shares, scaled to the whole line.
  const scale = Math.max(1, ahead / Math.max(1, ids.length));
  const own = counts.find((c) => c.tenantId === row.tenantId)?.n ?? 0;
  const top = counts
    .filter((c) => c.tenantId !== row.tenantId)
    .sort((a, b) => b.n - a.n)
    .slice(0, 5);
  const slugs = new Map(
    (
      await db().tenant.findMany({
        where: { id: { in: top.map((c) => c.tenantId) } },
        select: { id: true, slug: true },
      })
    ).map((t) => [t.id, t.slug]),
  );
  return {
    ...base,
    aheadOwn: Math.min(ahead, Math.round(own * scale)),
    aheadOthers: top
      .map((c) => ({ tenant: slugs.get(c.tenantId) ?? c.tenantId, jobs: Math.round(c.n * scale) }))
      .sort((a, b) => b.jobs - a.jobs || a.tenant.localeCompare(b.tenant)),
  };
}

function behindMessage(d: BlockedByDetail & { type: "behind_jobs" }): string {
  const slots =
    d.slots === 0
      ? ""
      : d.busySlots >= d.slots
        ? ` while all ${plural(d.slots, "worker slot")} of ${d.queue} are busy`
        : ` (${d.busySlots} of ${plural(d.slots, "worker slot")} busy)`;
  if (d.ahead === 0)
    return d.busySlots >= d.slots
      ? `Next in line on ${d.queue}${slots}; it starts when one frees up.`
      : `Next in line on ${d.queue}${slots}; a worker takes it in a moment.`;
  const whose =
    d.aheadOwn === null
      ? ""
      : ` (${d.aheadOwn} of this tenant's${d.aheadOthers.length > 0 ? `, ${d.aheadOthers.map((o) => `${o.jobs} of ${o.tenant}`).join(", ")}` : ""})`;
  return `Queued behind ${plural(d.ahead, "job")}${whose} on ${d.queue}${slots}.`;
}

/** What every cause check is given: the row, the live state, and how much the caller wants read. */
interface CauseCheck {
  row: BlockedRow;
  live: LiveState;
  options: { whose?: boolean; place?: boolean };
}

const iso = (d: Date) => d.toISOString();
/** When a queued job joined the line: its last sign of life, or its creation. */
const queuedSince = (row: BlockedRow) => row.heartbeatAt ?? row.createdAt;

/** 1. A person stopped the queue: nothing else moves the job until they resume it. */
function queuePaused({ row, live }: CauseCheck): BlockedBy | null {
  const pause = live.paused.get(row.queue);
  if (!pause) return null;
  return {
    type: "queue_paused",
    message: `Queue ${row.queue} is paused (by ${pause.by} since ${clock(pause.since)}): nothing on it starts until it is resumed on /queues.`,
    since: iso(pause.since),
    detail: { type: "queue_paused", queue: row.queue, pausedBy: pause.by },
  };
}

/** 2. No process takes jobs of this queue: every other cause is moot until one runs. */
function noWorker({ row, live }: CauseCheck): BlockedBy | null {
  if (live.slots.has(row.queue)) return null;
  return {
    type: "no_worker",
    message: `No live worker process consumes queue ${row.queue}: nothing takes its jobs until one starts (check the workers, GET /api/readyz).`,
    since: iso(queuedSince(row)),
    detail: { type: "no_worker", queue: row.queue },
  };
}

/** 3. The tenant's image pack is used up: the run would be refused at its start; only a grant moves it. */
async function quotaEmpty({ row }: CauseCheck): Promise<BlockedBy | null> {
  if (kindSpec(row.kind)?.provider !== "images") return null;
  const pack = await db().quotaPack.findUnique({
    where: { tenantId: row.tenantId },
    select: { size: true, remaining: true, updatedAt: true },
  });
  if (!pack || pack.remaining > 0) return null;
  return {
    type: "quota_empty",
    message: `The tenant's image generation pack is used up (all ${pack.size} spent or held): the generation would be refused at its start; grant units to go on.`,
    since: iso(pack.updatedAt),
    detail: { type: "quota_empty", packSize: pack.size },
  };
}

/** 4. The kind's outside service is down or refuses our configuration: the job resumes by itself when a probe succeeds. */
function serviceDown({ row, live }: CauseCheck): BlockedBy | null {
  const service = serviceOf(row.kind);
  const breaker = service ? live.breakers?.find((b) => b.service === service && b.state !== "closed") : undefined;
  if (!service || !breaker?.since) return null;
  const name = serviceName(service);
  // Open: the first call after the cool-down is the probe (a waiting job's next look, which comes
  // later the longer the outage lasts: lib/runs/outage-waits.ts); half-open: one is out.
  const probe = !breaker.probeAt
    ? "; a probe call is out"
    : breaker.probeAt > live.now
      ? `; probed again from ${clock(breaker.probeAt)}`
      : "; the next call is its probe";
  const lasted = formatDuration((live.now.getTime() - breaker.since.getTime()) / env().BOUNDED_TIME_SCALE);
  return {
    type: "service_down",
    // Misconfigured: it answers, refusing our configuration; a probe each cool-down sees it fixed.
    message:
      breaker.state === "misconfigured"
        ? `Waiting for ${name}, which refuses our configuration since ${clock(breaker.since)} (${lasted}: ${breaker.error ?? "refused"})${probe}. It resumes by itself once the configuration is fixed (npm run provider:check says what is wrong).`
        : `Waiting for ${name}, down since ${clock(breaker.since)} (${lasted}: ${breaker.error ?? "no answer"})${probe}. It resumes by itself.`,
    since: iso(breaker.since),
    ...(breaker.probeAt && breaker.probeAt > live.now ? { until: iso(breaker.probeAt) } : {}),
    detail: {
      type: "service_down",
      service,
      serviceName: name,
      error: breaker.error,
      answersAgain: false,
      misconfigured: breaker.state === "misconfigured",
    },
  };
}

/**
 * 5. A delayed job waiting out its deferral, by what it waits for: an outage that is over (only
 * its wake-up is left), its tenant's fair share of the provider, a full provider, or a rate-limit
 * window — the more specific reason first.
 */
async function deferred({ row, live }: CauseCheck): Promise<BlockedBy | null> {
  if (row.status !== "delayed" || row.wakeUpAt === null || row.wakeUpAt <= live.now) return null;
  const wakeUpAt = row.wakeUpAt;
  const at = { since: iso(queuedSince(row)), until: iso(wakeUpAt) };
  const scope = deferralScope(row.message);
  // A deferral names a scope unless it waited for an outage (that message names the service).
  const outage = !scope ? serviceOf(row.kind) : null;
  if (outage) {
    return {
      type: "service_down",
      message: `Gave its slot back while ${serviceName(outage)} was down; it answers again, and the job goes back in line at ${clock(wakeUpAt)}.`,
      ...at,
      detail: {
        type: "service_down",
        service: outage,
        serviceName: serviceName(outage),
        error: null,
        answersAgain: true,
        misconfigured: false,
      },
    };
  }
  const provider = scope ? parseProviderScope(scope) : null;
  const slots = provider ? await live.provider(provider) : null;
  if (provider && slots) {
    const held = slots.inFlightByTenant[row.tenantId] ?? 0;
    const tenants = new Set([...Object.keys(slots.inFlightByTenant), ...slots.waiting, row.tenantId]);
    const share = Math.ceil(slots.concurrency / tenants.size);
    if (tenants.size > 1 && held >= share) {
      return {
        type: "tenant_share",
        message: `Its tenant holds ${held} of the ${provider} provider's ${slots.concurrency} slots, its fair share while ${tenants.size} tenants want them: it waits for its own calls to finish (back at ${clock(wakeUpAt)}).`,
        ...at,
        detail: { type: "tenant_share", provider, held, share, concurrency: slots.concurrency, tenants: tenants.size },
      };
    }
    if (slots.inFlight >= slots.concurrency) {
      return {
        type: "provider_slots",
        message: `All ${slots.concurrency} slots of the ${provider} provider are taken (${held} by this tenant): it gave its worker slot back until ${clock(wakeUpAt)}.`,
        ...at,
        detail: { type: "provider_slots", provider, inFlight: slots.inFlight, concurrency: slots.concurrency },
      };
    }
  }
  const w = windowName(scope ?? "its rate limit");
  return {
    type: "rate_limit",
    message: `Waiting for ${w.window} until ${clock(wakeUpAt)}; it resumes by itself.`,
    ...at,
    detail: { type: "rate_limit", ...w },
  };
}

/** 6. Nothing is wrong: it waits for its turn (a delayed job whose wake-up has passed is back in line too). */
async function behindJobs({ row, live, options }: CauseCheck): Promise<BlockedBy> {
  if (options.place === false) {
    // Only the cause is wanted (the Queues page's tally): the place in line is not read.
    const slots = live.slots.get(row.queue) ?? { workers: 0, slots: 0 };
    const detail = {
      type: "behind_jobs" as const,
      queue: row.queue,
      ahead: 0,
      aheadOwn: null,
      aheadOthers: [],
      busySlots: 0,
      slots: slots.slots,
    };
    return { type: "behind_jobs", message: `Waiting its turn on ${row.queue}.`, since: iso(queuedSince(row)), detail };
  }
  const line = await placeInLine(row, live, options.whose ?? true);
  return { type: "behind_jobs", message: behindMessage(line), since: iso(queuedSince(row)), detail: line };
}

/** The causes in their precedence (see the top of this file): the first that holds is the answer. */
const CAUSES: readonly ((check: CauseCheck) => BlockedBy | null | Promise<BlockedBy | null>)[] = [
  queuePaused,
  noWorker,
  quotaEmpty,
  serviceDown,
  deferred,
  behindJobs,
];

/**
 * Why `row` is not running, from `live` (read once by the caller; see `readLiveState`), or null
 * when it is not waiting. `whose` counts whose jobs are ahead in line (a few more reads; the
 * Queues page's sample leaves it out).
 */
export async function blockedByOf(
  row: BlockedRow,
  live: LiveState,
  options: { whose?: boolean; place?: boolean } = {},
): Promise<BlockedBy | null> {
  if (!OPEN_WAITING.has(row.status)) return null;
  for (const cause of CAUSES) {
    const found = await cause({ row, live, options });
    if (found) return found;
  }
  return null;
}

/** Why job `id` is not running now; null when it is not waiting (or does not exist). */
export async function getBlockedBy(id: string, now: Date = new Date()): Promise<BlockedBy | null> {
  if (!isUuid(id)) return null;
  const row = await db().job.findUnique({ where: { id }, select: blockedRowSelect });
  if (!row || !OPEN_WAITING.has(row.status)) return null;
  return blockedByOf(row, await readLiveState(now));
}

/** How many jobs of a queue the Queues page asks about: the longest-waiting ones. */
export const QUEUE_CAUSE_SAMPLE = 20;

export interface QueueCause {
  queue: string;
  /** The most common cause among the sampled jobs; null when nothing waits. */
  type: BlockedByType | null;
  /** One of those jobs' sentences. */
  message: string | null;
  /** Jobs of that cause in the sample, and the sample's size. */
  count: number;
  sampled: number;
  /** Queued and delayed jobs of the queue in all. */
  waiting: number;
}

/**
 * Per queue, the most common cause now — from a sample, not every job: the `QUEUE_CAUSE_SAMPLE`
 * longest-waiting queued or delayed rows of each queue, answered against one read of the live
 * state (a paused queue or one with no worker is answered for all its jobs without a per-job read).
 * A queue of thousands costs the same as a queue of twenty.
 */
export async function mostCommonCauses(now: Date = new Date()): Promise<QueueCause[]> {
  const [live, counts] = await Promise.all([
    readLiveState(now),
    db().job.groupBy({ by: ["queue"], where: { status: { in: ["queued", "delayed"] } }, _count: { _all: true } }),
  ]);
  return Promise.all(
    QUEUE_NAMES.map(async (name): Promise<QueueCause> => {
      const waiting = counts.find((c) => c.queue === name)?._count._all ?? 0;
      if (waiting === 0) return { queue: name, type: null, message: null, count: 0, sampled: 0, waiting };
      const rows = await db().job.findMany({
        where: { queue: name, status: { in: ["queued", "delayed"] } },
        select: blockedRowSelect,
        orderBy: { createdAt: "asc" },
        take: QUEUE_CAUSE_SAMPLE,
      });
      const answers = (
        await Promise.all(
          rows.map(async (row): Promise<{ row: BlockedRow; answer: BlockedBy }[]> => {
            const answer = await blockedByOf(row, live, { place: false });
            return answer ? [{ row, answer }] : [];
          }),
        )
      ).flat();
      const tally = new Map<BlockedByType, { row: BlockedRow; answer: BlockedBy }[]>();
      for (const a of answers) tally.set(a.answer.type, [...(tally.get(a.answer.type) ?? []), a]);
      const top = [...tally].sort(
        (a, b) => b[1].length - a[1].length || BLOCKED_BY_TYPES.indexOf(a[0]) - BLOCKED_BY_TYPES.indexOf(b[0]),
      )[0];
      if (!top) return { queue: name, type: null, message: null, count: 0, sampled: 0, waiting };
      // The sentence of the longest-waiting job of that cause, its place in line read for it alone.
      const first = top[1][0]!;
      const message =
        top[0] === "behind_jobs"
          ? ((await blockedByOf(first.row, live, { whose: false }))?.message ?? first.answer.message)
          : first.answer.message;
      return { queue: name, type: top[0], message, count: top[1].length, sampled: answers.length, waiting };
    }),
  );
}
