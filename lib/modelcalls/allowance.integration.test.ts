import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { resolveBudget } from "@/lib/budgets/budgets";
import { closeDb, db } from "@/lib/db/client";
import { parseEnv } from "@/lib/env";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { callShape, getCallAllowance } from "./allowance";

// Jobs are written under a kind of their own (or a tenant of their own), so other tests' jobs never count.
const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(() => closeDb());

const ago = (now: Date, ms: number) => new Date(now.getTime() - ms);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// The catalog at its defaults: an import's rows go eight to a call, 512 in flight, and the model
// provider takes 32 calls at once; an agent's steps go one after another.
describe("callShape: how a typical job calls the model", () => {
  const env = parseEnv({});

  it("an import of 88 rows is 11 calls side by side: one round, so a call may take the whole budget (not a row's 1/88)", () => {
    expect(callShape("csv_import", 88, env)).toEqual({ itemsPerCall: 8, callsPerJob: 11, callsAtOnce: 32, rounds: 1 });
  });

  it("an import of 3,000 rows is 375 calls, 32 at once: 12 rounds", () => {
    expect(callShape("csv_import", 3_000, env)).toEqual({
      itemsPerCall: 8,
      callsPerJob: 375,
      callsAtOnce: 32,
      rounds: 12,
    });
  });

  it("an agent run of 6 steps waits for each: 6 rounds", () => {
    expect(callShape("agent_run", 6, env)).toMatchObject({ callsAtOnce: 1, rounds: 6 });
  });

  it("fewer calls at once when the provider takes fewer", () => {
    expect(callShape("csv_import", 88, parseEnv({ BOUNDED_PROVIDER_MODEL_CONCURRENCY: "4" }))).toMatchObject({
      callsAtOnce: 4,
      rounds: 3,
    });
  });
});

describe("getCallAllowance: the soft budget over the rounds of calls of a typical job", () => {
  async function insertJobs(
    kind: string,
    queue: string,
    jobs: { total: number | null; createdAt: Date }[],
  ): Promise<void> {
    const slug = uniqueTenantSlug("allowance");
    tenants.push(slug);
    const tenant = await db().tenant.create({ data: { slug }, select: { id: true } });
    await db().job.createMany({
      data: jobs.map((j) => ({
        kind,
        queue,
        tenantId: tenant.id,
        total: j.total,
        budgetSoftMs: 1,
        budgetHardMs: 2,
        budgetSource: "test",
        progressToken: randomBytes(16).toString("hex"),
        createdAt: j.createdAt,
      })),
    });
  }

  it("a kind whose items are one call each, one at a time: the soft budget over the median total of the last 7 days' jobs", async () => {
    const kind = `kind-${randomUUID().slice(0, 8)}`;
    const now = new Date();
    await insertJobs(kind, "imports", [
      { total: 100, createdAt: ago(now, HOUR) },
      { total: 200, createdAt: ago(now, DAY) },
      { total: 300, createdAt: ago(now, 2 * DAY) },
      { total: 5_000, createdAt: ago(now, 3 * DAY) },
      { total: null, createdAt: ago(now, HOUR) }, // size unknown: not a typical job
      { total: 90_000, createdAt: ago(now, 8 * DAY) }, // too old
    ]);
    const softMs = resolveBudget("imports", kind).softMs;
    const median = 250; // of 100, 200, 300, 5000
    expect(await getCallAllowance(kind)).toMatchObject({
      queue: "imports",
      medianItems: median,
      jobs: 4,
      softMs,
      rounds: median,
      allowanceMs: Math.round(softMs / median),
    });
  });

  it("uses the queue most of the kind's jobs ran on, or the one asked for", async () => {
    const kind = `kind-${randomUUID().slice(0, 8)}`;
    const now = new Date();
    await insertJobs(kind, "agent-interactive", [
      { total: 10, createdAt: ago(now, HOUR) },
      { total: 10, createdAt: ago(now, HOUR) },
    ]);
    await insertJobs(kind, "agent-batch", [{ total: 40, createdAt: ago(now, HOUR) }]);
    expect(await getCallAllowance(kind)).toMatchObject({ queue: "agent-interactive", medianItems: 10 });
    expect(await getCallAllowance(kind, "agent-batch")).toMatchObject({
      queue: "agent-batch",
      medianItems: 40,
      allowanceMs: Math.round(resolveBudget("agent-batch", kind).softMs / 40),
    });
  });

  it("is null for a kind without recent jobs", async () => {
    expect(await getCallAllowance(`kind-${randomUUID().slice(0, 8)}`)).toBeNull();
  });
});
