import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { finalizeJob } from "@/lib/runs/finalize";
import { logger } from "@/lib/log";
import { closeRedis, createRedis, type RedisClient } from "@/lib/redis/client";
import { removeWebhook, setWebhook } from "@/lib/webhooks/endpoints";
import { deliverySettings } from "@/lib/webhooks/policy";
import { closeWebhookQueue } from "@/lib/webhooks/queue";
import { verifyWebhook } from "@/lib/webhooks/verify";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { waitFor } from "@/test/helpers/wait";
import { startSimulators, type RunningSimulators } from "../simulators/server";
import { startWebhookDelivery } from "./worker";

// Real PostgreSQL, Redis, BullMQ and HTTP: a job's ending goes through the outbox (the trigger on
// Job), the relay, the `webhooks` queue and a signed POST to the simulators' receiver.
let sim: RunningSimulators;
let connection: RedisClient;
let stop: () => Promise<void>;
const tenants: string[] = [];
const settings = deliverySettings(0.001); // retries 30 ms, 60 ms…; 2 s per request

beforeAll(async () => {
  sim = await startSimulators();
  connection = createRedis("worker");
  stop = startWebhookDelivery({ connection, log: logger("test"), settings });
});

afterAll(async () => {
  await stop();
  await connection.quit();
  await closeWebhookQueue();
  await sim.close();
  for (const t of tenants) await deleteTenant(t);
  await closeRedis();
  await closeDb();
});

beforeEach(() => {
  sim.webhookReceiver.configure({ failFirst: 0, delayMs: 0 });
});

/** A tenant with an endpoint at the receiver, which is given the secret shown at registration. */
async function tenantWithWebhook(label: string) {
  const tenant = uniqueTenantSlug(label);
  tenants.push(tenant);
  const set = await setWebhook(tenant, { url: `${sim.url}/webhooks/receiver` });
  if (set.type !== "created") throw new Error(set.type);
  sim.webhookReceiver.configure({ secret: set.secret });
  return { tenant, secret: set.secret };
}

async function endedJob(tenant: string, message = "Finished: 3 of 3 rows.") {
  const job = await makeJob(tenant, { total: 3, softMs: 60_000, hardMs: 90_000 });
  await db().job.update({ where: { id: job.id }, data: { status: "running", attempt: 1, processed: 3 } });
  expect(await finalizeJob(job.id, 1, { status: "completed", message, from: ["running"] })).toBe("completed");
  return job.id;
}

const deliveryOf = (jobId: string) => db().webhookDelivery.findFirstOrThrow({ where: { jobId } });
const receivedFor = (deliveryId: string) => sim.webhookReceiver.received().filter((r) => r.deliveryId === deliveryId);

describe("signed webhooks when a job ends", () => {
  it("posts the job's summary, signed; the receiver verifies every delivery", async () => {
    const { tenant, secret } = await tenantWithWebhook("signed");
    const jobId = await endedJob(tenant);
    const delivered = await waitFor(async () => (await deliveryOf(jobId)).status === "delivered" && deliveryOf(jobId), {
      timeoutMs: 20_000,
      what: "the delivery",
    });
    expect(delivered).toMatchObject({ attempts: 1, lastStatusCode: 200, lastError: null, jobStatus: "completed" });
    const got = receivedFor(delivered.id);
    expect(got).toHaveLength(1);
    expect(got.every((r) => r.verified)).toBe(true);
    // What a receiver would run, on the raw body it got.
    expect(verifyWebhook({ body: got[0]!.body, header: got[0]!.signature, secret }).ok).toBe(true);
    const body = JSON.parse(got[0]!.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      "id",
      "kind",
      "tenant",
      "status",
      "total",
      "processed",
      "failed",
      "message",
      "finishedAt",
    ]);
    expect(body).toMatchObject({
      id: jobId,
      kind: "csv_import",
      tenant,
      status: "completed",
      total: 3,
      processed: 3,
      failed: 0,
      message: "Finished: 3 of 3 rows.",
    });
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(body.finishedAt).toBe(row.finishedAt!.toISOString());
    expect(got[0]!.body).not.toContain(row.progressToken);
    expect(got[0]!.body).not.toContain(secret);
  });

  it("a receiver that fails twice gets the delivery on the third try, with the same delivery id", async () => {
    const { tenant } = await tenantWithWebhook("retry");
    sim.webhookReceiver.configure({ failFirst: 2 });
    const jobId = await endedJob(tenant);
    const delivered = await waitFor(async () => (await deliveryOf(jobId)).status === "delivered" && deliveryOf(jobId), {
      timeoutMs: 20_000,
      what: "the third try",
    });
    expect(delivered).toMatchObject({ attempts: 3, lastStatusCode: 200, lastError: null, nextAttemptAt: null });
    const got = receivedFor(delivered.id);
    expect(got.map((r) => r.answered)).toEqual([500, 500, 200]);
    expect(got.every((r) => r.verified)).toBe(true);
  });

  it("records each failed try and gives up after the last one", async () => {
    const { tenant } = await tenantWithWebhook("give-up");
    sim.webhookReceiver.configure({ failFirst: 100 });
    const jobId = await endedJob(tenant);
    const failed = await waitFor(async () => (await deliveryOf(jobId)).status === "failed" && deliveryOf(jobId), {
      timeoutMs: 20_000,
      what: "the delivery to fail",
    });
    expect(failed).toMatchObject({ attempts: settings.attempts, lastStatusCode: 500, nextAttemptAt: null });
    expect(failed.lastError).toMatch(/failing on purpose/);
    expect(receivedFor(failed.id)).toHaveLength(settings.attempts);
  });

  it("a job's ending never waits on a hanging receiver: the next try follows the timeout", async () => {
    const { tenant } = await tenantWithWebhook("hang");
    sim.webhookReceiver.configure({ delayMs: 60_000 });
    const first = await endedJob(tenant);
    const d1 = await deliveryOf(first);
    // The receiver holds the first delivery's request…
    await waitFor(() => receivedFor(d1.id).length === 1, {
      timeoutMs: 20_000,
      what: "the receiver to hold the request",
    });
    // …and another job of the tenant ends all the same, its delivery already in the outbox.
    const second = await endedJob(tenant);
    expect((await db().job.findUniqueOrThrow({ where: { id: second } })).status).toBe("completed");
    expect(await deliveryOf(second)).toMatchObject({ status: "pending", attempts: 0 });
    expect(await deliveryOf(first)).toMatchObject({ status: "pending", attempts: 0 });
    // The held request times out (2 s), is recorded, and a later try gets through.
    const timedOut = await waitFor(async () => (await deliveryOf(first)).attempts >= 1 && deliveryOf(first), {
      timeoutMs: 20_000,
      what: "the first try to time out",
    });
    sim.webhookReceiver.configure({ delayMs: 0 });
    expect(timedOut.lastError ?? "").toMatch(/did not answer within/);
    await waitFor(
      async () => (await deliveryOf(first)).status === "delivered" && (await deliveryOf(second)).status === "delivered",
      { timeoutMs: 30_000, what: "both deliveries" },
    );
  });

  it("writes nothing for an ending that is rolled back, and nothing for a tenant without a webhook", async () => {
    const { tenant } = await tenantWithWebhook("rollback");
    const job = await makeJob(tenant, { total: 1, softMs: 60_000, hardMs: 90_000 });
    await expect(
      db().$transaction(async (tx) => {
        await tx.job.update({ where: { id: job.id }, data: { status: "failed", message: "no" } });
        expect(await tx.webhookDelivery.count({ where: { jobId: job.id } })).toBe(1);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await db().webhookDelivery.count({ where: { jobId: job.id } })).toBe(0);

    const bare = uniqueTenantSlug("no-hook");
    tenants.push(bare);
    const other = await endedJob(bare);
    expect(await db().webhookDelivery.count({ where: { jobId: other } })).toBe(0);
  });

  it("sends the message written after the status (a message that needs the final counts)", async () => {
    const { tenant } = await tenantWithWebhook("late-message");
    const job = await makeJob(tenant, { total: 3, softMs: 60_000, hardMs: 90_000 });
    await db().job.update({
      where: { id: job.id },
      data: { status: "running", attempt: 1, processed: 2, message: "Running." },
    });
    // No `known` row: the status flips first, the message follows in a second statement.
    await finalizeJob(job.id, 1, {
      status: "timed_out",
      message: (row) => `Timed out after ${row.processed} of ${row.total}.`,
      from: ["running"],
    });
    const d = await waitFor(async () => (await deliveryOf(job.id)).status === "delivered" && deliveryOf(job.id), {
      timeoutMs: 20_000,
      what: "the delivery",
    });
    expect(JSON.parse(receivedFor(d.id)[0]!.body)).toMatchObject({
      status: "timed_out",
      message: "Timed out after 2 of 3.",
    });
  });

  it("a removed endpoint's pending deliveries are given up", async () => {
    const { tenant } = await tenantWithWebhook("removed");
    sim.webhookReceiver.configure({ failFirst: 100 });
    const jobId = await endedJob(tenant);
    await waitFor(async () => (await deliveryOf(jobId)).attempts >= 1, { timeoutMs: 20_000, what: "a first try" });
    expect(await removeWebhook(tenant)).toEqual({ type: "removed", tenant });
    const d = await waitFor(async () => (await deliveryOf(jobId)).status === "failed" && deliveryOf(jobId), {
      timeoutMs: 20_000,
      what: "the delivery to be given up",
    });
    expect(d.lastError).toMatch(/removed|failing on purpose/);
  });
});

describe("registering an endpoint", () => {
  it("refuses a URL that is not http or https, or carries credentials, and writes nothing", async () => {
    const tenant = uniqueTenantSlug("bad-url");
    for (const url of [
      "ftp://example.com/x",
      "javascript:alert(1)",
      "file:///etc/passwd",
      "not a url",
      "https://user:pw@example.com/",
    ]) {
      await expect(setWebhook(tenant, { url })).rejects.toThrow();
    }
    expect(await db().tenant.count({ where: { slug: tenant } })).toBe(0);
    expect(await setWebhook("Not A Tenant!", { url: "https://example.com" })).toMatchObject({ type: "invalid_tenant" });
  });

  it("shows a secret on creation and on rotation only; a URL change keeps it", async () => {
    const tenant = uniqueTenantSlug("secret");
    tenants.push(tenant);
    const created = await setWebhook(tenant, { url: "https://example.com/a" });
    expect(created.type).toBe("created");
    expect(created.type === "created" && created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const updated = await setWebhook(tenant, { url: "https://example.com/b" });
    expect(updated).toMatchObject({ type: "updated", secret: null, endpoint: { url: "https://example.com/b" } });
    const stored = await db().webhookEndpoint.findFirstOrThrow({ where: { tenant: { slug: tenant } } });
    expect(created.type === "created" && stored.secret).toBe(created.type === "created" && created.secret);
    const rotated = await setWebhook(tenant, { url: "https://example.com/b", rotateSecret: true });
    expect(rotated.type === "rotated" && rotated.secret).toMatch(/^whsec_/);
    expect(rotated.type === "rotated" && rotated.secret).not.toBe(stored.secret);
    expect(await removeWebhook(tenant)).toEqual({ type: "removed", tenant });
    expect(await removeWebhook(tenant)).toEqual({ type: "not_found", tenant });
  });
});
