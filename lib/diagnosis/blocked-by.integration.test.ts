import { randomUUID } from "node:crypto";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";

// The caller of "this request", as the auth code would find it: a viewer (GET /api/jobs/:id's role).
vi.mock("@/lib/auth/principal", async () => {
  const viewer: Principal = { userId: "u-view", username: "viewer-blocked-by", role: "viewer", via: "token" };
  return { currentPrincipal: async () => viewer, requireRole: async () => viewer };
});

const { closeDb, db } = await import("@/lib/db/client");
const { createJob } = await import("@/lib/jobs/create");
const { logger } = await import("@/lib/log");
const { createGeneration } = await import("@/lib/generations/create-generation");
const { claim } = await import("@/lib/quota/reserves");
const { dropQuotaTenants, quotaTenant } = await import("@/lib/quota/test-fixtures");
const { QUEUE_NAMES } = await import("@/lib/catalog/catalog");
const { pausedHashKey, pauseQueue } = await import("@/lib/queues/pause");
const { announcePresence, withdrawPresence } = await import("@/lib/queues/presence");
const { closeQueues, queue } = await import("@/lib/queues/queues");
const { breakerKey, createBreaker } = await import("@/lib/ratelimit/breaker");
const { OUTSIDE_SERVICES } = await import("@/lib/ratelimit/breaker-services");
const { OutsideServiceDown, RateLimitDefer } = await import("@/lib/ratelimit/errors");
const { createProviderLimiter, providerSlotsKey, providerWaitersKey } = await import("@/lib/ratelimit/provider");
const { closeRedis, redis } = await import("@/lib/redis/client");
const { deferRun } = await import("@/lib/runs/reschedule");
const { waitFor } = await import("@/test/helpers/wait");
const { deleteTenant, uniqueTenantSlug } = await import("@/test/helpers/tenants");
const { GET } = await import("@/app/api/jobs/[id]/route");
const { mostCommonCauses } = await import("./blocked-by");
const { CUSTOMER_STATUS_LABEL, getCustomerProgress, OPERATOR_WORDS, WAITING_FOR_SERVICE_LABEL } = await import(
  "@/lib/progress/customer-progress"
);

/**
 * One test per cause a waiting job can name, each made from the real state that causes it (a
 * paused queue, no live worker, jobs ahead in BullMQ's line, an empty pack, an open breaker, a
 * deferral for a rate-limit window, a tenant holding its share of the provider's slots, a full
 * provider), asserting what GET /api/jobs/:id answers.
 */

const tenants: string[] = [];
const presences: string[] = [];
const releases: (() => void)[] = [];
const pending: Promise<unknown>[] = [];

async function reset() {
  for (const name of QUEUE_NAMES) {
    await queue(name).resume();
    await queue(name).obliterate({ force: true });
  }
  await redis().del(
    pausedHashKey(),
    ...OUTSIDE_SERVICES.map(breakerKey),
    providerSlotsKey("model"),
    providerWaitersKey("model"),
  );
}

beforeEach(reset);
afterEach(async () => {
  for (const release of releases.splice(0)) release();
  await Promise.allSettled(pending.splice(0));
  for (const id of presences.splice(0)) await withdrawPresence(redis(), id);
  await reset();
  // The deferrals' per-minute rollups name the tenant (the limiter page's top tenants): theirs go too.
  await db().rateLimitRollup.deleteMany({ where: { tenant: { in: tenants } } });
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
  await dropQuotaTenants();
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** A live worker process consuming `queues`, as workers/main.ts announces itself. */
async function workerServes(...queues: string[]) {
  const id = `blocked-by-test:${randomUUID()}`;
  presences.push(id);
  await announcePresence(redis(), id, { host: "blocked-by-test", pid: 1, queues, concurrency: 4 }, 60_000);
}

function tenant(label: string) {
  const slug = uniqueTenantSlug(label);
  tenants.push(slug);
  return slug;
}

/** What GET /api/jobs/:id answers for `blockedBy`. */
async function blockedBy(id: string) {
  const response = await GET(new Request(`http://localhost/api/jobs/${id}`), { params: Promise.resolve({ id }) });
  expect(response.status).toBe(200);
  return (
    (await response.json()) as {
      blockedBy: {
        type: string;
        message: string;
        since: string;
        until?: string;
        detail: Record<string, unknown>;
      } | null;
    }
  ).blockedBy;
}

const importJob = (slug: string) => createJob({ kind: "csv_import", tenantSlug: slug, total: 10 });

/** A row running its first attempt, then deferred by the reschedule policy's own code for `defer`. */
async function deferredJob(
  slug: string,
  kind: "csv_import" | "marketplace_sync",
  defer: InstanceType<typeof RateLimitDefer> | InstanceType<typeof OutsideServiceDown>,
) {
  const { jobId } = await createJob({ kind, tenantSlug: slug, total: 10 });
  const row = await db().job.update({
    where: { id: jobId },
    data: { status: "running", attempt: 1, startedAt: new Date(), attemptStartedAt: new Date() },
    select: { queue: true, attempt: true, tenantId: true },
  });
  const result = await deferRun(
    { jobId, attempt: row.attempt, queue: row.queue, kind },
    new Date(),
    defer,
    logger("test"),
    {} as QueueJob,
    undefined,
  );
  expect(result).toBe("delayed");
  return { jobId, tenantId: row.tenantId };
}

/** Holds `n` slots of the model provider for `tenantId` until the test ends (real holders in Redis). */
async function holdModelSlots(limiter: ReturnType<typeof createProviderLimiter>, tenantId: string, n: number) {
  let started = 0;
  for (let i = 0; i < n; i++) {
    pending.push(
      limiter.withSlot(
        "model",
        () =>
          new Promise<void>((resolve) => {
            started++;
            releases.push(resolve);
          }),
        { tenant: tenantId, maxWaitMs: 10_000 },
      ),
    );
  }
  await waitFor(() => started === n, { timeoutMs: 10_000, what: `${n} model slots held` });
}

describe("GET /api/jobs/:id blockedBy: every waiting job says why, from the live state", () => {
  it("queue_paused: a job in a paused queue says who paused it and since when, before any other cause (here: no worker either)", async () => {
    const { jobId, progressToken } = await importJob(tenant("paused"));
    await pauseQueue("imports", { username: "alice" });
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({ type: "queue_paused", detail: { queue: "imports", pausedBy: "alice" } });
    expect(b!.message).toMatch(/^Queue imports is paused \(by alice since \d\d:\d\d:\d\d UTC\)/);
    expect(Date.now() - Date.parse(b!.since)).toBeLessThan(60_000);
    // The customer reads the same fact in their words, without the operators'.
    const customer = await getCustomerProgress(progressToken);
    expect(customer!.message).toBe(
      "Our team has paused this kind of work for the moment; yours starts as soon as they turn it back on. You do not need to send anything again.",
    );
    expect(customer!.message).not.toMatch(OPERATOR_WORDS);
  });

  it("no_worker: a queued job on a queue no live worker consumes says so (a worker of other queues does not count)", async () => {
    await workerServes("documents");
    const { jobId } = await importJob(tenant("noworker"));
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({ type: "no_worker", detail: { queue: "imports" } });
    expect(b!.message).toContain("No live worker process consumes queue imports");
  });

  it("behind_jobs: a queued job counts the jobs BullMQ serves before it, and whose they are", async () => {
    await workerServes("imports");
    const mine = tenant("behind-mine");
    const other = tenant("behind-other");
    await importJob(other); // another tenant's first job: priority 2
    for (let i = 0; i < 3; i++) await importJob(mine); // priorities 2, 3, 4
    const { jobId, progressToken } = await importJob(mine); // priority 5: behind all four
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({
      type: "behind_jobs",
      detail: { ahead: 4, aheadOwn: 3, aheadOthers: [{ tenant: other, jobs: 1 }], busySlots: 0, slots: 4 },
    });
    expect(b!.message).toBe(
      `Queued behind 4 jobs (3 of this tenant's, 1 of ${other}) on imports (0 of 4 worker slots busy).`,
    );
    expect((await getCustomerProgress(progressToken))!.message).toBe(
      "Waiting for 3 other files of yours and 1 from other customers to go first; it starts right after.",
    );
    // The other tenant's first job is first in line.
    const first = await db().job.findFirstOrThrow({ where: { tenant: { slug: other } }, select: { id: true } });
    expect((await blockedBy(first.id))!.detail).toMatchObject({ ahead: 0 });
  });

  it("quota_empty: a queued generation whose tenant's pack is used up says the pack is empty", async () => {
    await workerServes("generations");
    const { tenantId, adIds } = await quotaTenant("blocked", 1, 2);
    const slug = (await db().tenant.findUniqueOrThrow({ where: { id: tenantId }, select: { slug: true } })).slug;
    const { jobId } = await createGeneration({ tenant: slug, adId: adIds[0], kind: "generate" });
    expect((await blockedBy(jobId))!.type).toBe("behind_jobs");
    await claim({ tenantId, kind: "generate", subject: adIds[1]! }); // another generation takes the last unit
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({ type: "quota_empty", detail: { packSize: 1 } });
    expect(b!.message).toContain("image generation pack is used up");
  });

  it("service_down: a queued import whose model service's breaker is open names the service, since when and the next probe", async () => {
    await workerServes("imports");
    const { jobId } = await importJob(tenant("down"));
    // A cool-down of a minute of real time (the test scale's own would end in 20 ms): the next probe is ahead.
    const breaker = createBreaker({ cooldownMs: 60_000 });
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:4010"), { code: "ECONNREFUSED" });
    for (let i = 0; i < 3; i++) await breaker.guard("model", () => Promise.reject(refused)).catch(() => undefined);
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({
      type: "service_down",
      detail: { service: "model", serviceName: "the model service", answersAgain: false },
    });
    expect(b!.message).toMatch(/^Waiting for the model service, down since \d\d:\d\d:\d\d UTC/);
    expect(b!.message).toContain("ECONNREFUSED");
    expect(Date.parse(b!.until!) - Date.now()).toBeGreaterThan(30_000);
    expect(b!.message).toMatch(/; probed again from \d\d:\d\d:\d\d UTC\. It resumes by itself\.$/);
  });

  it("a job delayed for a service that is down tells its customer it waits for the service, with no brief pause and no time promised; a rate-limit wait is a brief pause", async () => {
    await workerServes("imports");
    const down = new OutsideServiceDown(
      "model",
      30_000,
      new Date(Date.now() - 60_000),
      "not answering: 3 calls in flight, none answered for 41 s",
      "the model service",
    );
    const { jobId } = await deferredJob(tenant("outage"), "csv_import", down);
    const { progressToken } = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: { progressToken: true },
    });
    const customer = (await getCustomerProgress(progressToken))!;
    expect(customer).toMatchObject({
      status: "delayed",
      statusLabel: WAITING_FOR_SERVICE_LABEL,
      waitsForService: "the model service",
      serviceWaits: [{ service: "model", to: null }],
    });

    await workerServes("marketplace-sync");
    const slug = tenant("window-words");
    const sync = await deferredJob(slug, "marketplace_sync", new RateLimitDefer(15_000, `statistics:${slug}`));
    const token = (await db().job.findUniqueOrThrow({ where: { id: sync.jobId }, select: { progressToken: true } }))
      .progressToken;
    expect(await getCustomerProgress(token)).toMatchObject({
      statusLabel: CUSTOMER_STATUS_LABEL.delayed,
      waitsForService: null,
      serviceWaits: [],
    });
  });

  it("rate_limit: a sync deferred for its tenant's statistics window names the window and when it wakes up", async () => {
    await workerServes("marketplace-sync");
    const slug = tenant("window");
    const { jobId } = await deferredJob(slug, "marketplace_sync", new RateLimitDefer(15_000, `statistics:${slug}`));
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { wakeUpAt: true } });
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({
      type: "rate_limit",
      until: row.wakeUpAt!.toISOString(),
      detail: { family: "statistics" },
    });
    expect(b!.message).toContain(
      `the marketplace's statistics limit, 1 request per 1 min per tenant (statistics:${slug}) until`,
    );
  });

  it("tenant_share: a job deferred for the model provider while its tenant holds its fair share of the slots says so", async () => {
    await workerServes("imports");
    const limiter = createProviderLimiter();
    const c = limiter.limits("model").concurrency;
    const share = Math.ceil(c / 2);
    const { jobId, tenantId } = await deferredJob(
      tenant("share"),
      "csv_import",
      new RateLimitDefer(10_000, "provider:model"),
    );
    await holdModelSlots(limiter, tenantId, share);
    await holdModelSlots(limiter, randomUUID(), c - share);
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({
      type: "tenant_share",
      detail: { provider: "model", held: share, share, concurrency: c, tenants: 2 },
    });
    expect(b!.message).toContain(
      `Its tenant holds ${share} of the model provider's ${c} slots, its fair share while 2 tenants want them`,
    );
  });

  it("provider_slots: a job deferred for the model provider while other tenants' calls take every slot says the provider is full", async () => {
    await workerServes("imports");
    const limiter = createProviderLimiter();
    const c = limiter.limits("model").concurrency;
    const { jobId } = await deferredJob(tenant("slots"), "csv_import", new RateLimitDefer(10_000, "provider:model"));
    // Its own tenant holds nothing, so it is below its share: the provider is simply full.
    await holdModelSlots(limiter, randomUUID(), c);
    const b = await blockedBy(jobId);
    expect(b).toMatchObject({ type: "provider_slots", detail: { provider: "model", inFlight: c, concurrency: c } });
    expect(b!.message).toContain(`All ${c} slots of the model provider are taken (0 by this tenant)`);
  });

  it("a running or finished job is blocked by nothing: null", async () => {
    const { jobId } = await importJob(tenant("running"));
    await db().job.update({ where: { id: jobId }, data: { status: "running" } });
    expect(await blockedBy(jobId)).toBeNull();
  });

  it("the Queues page's most common cause per queue comes from a sample: a paused queue names queue_paused", async () => {
    await workerServes("imports", "documents");
    const slug = tenant("sample");
    for (let i = 0; i < 3; i++) await importJob(slug);
    await pauseQueue("imports", { username: "bob" });
    const causes = await mostCommonCauses();
    const imports = causes.find((c) => c.queue === "imports")!;
    expect(imports).toMatchObject({ type: "queue_paused", count: imports.sampled });
    expect(imports.sampled).toBeGreaterThanOrEqual(3);
    // Resumed, they wait their turn; the sentence is the longest-waiting one's, its place read.
    await queue("imports").resume();
    const resumed = (await mostCommonCauses()).find((c) => c.queue === "imports")!;
    expect(resumed).toMatchObject({
      type: "behind_jobs",
      count: resumed.sampled,
      message: "Next in line on imports (0 of 4 worker slots busy); a worker takes it in a moment.",
    });
  });
});
