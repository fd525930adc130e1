import { randomInt } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { roundTrips } from "@/test/helpers/round-trips";
import { recordRefusal } from "./refusals";

// An address of the documentation range, new to every run: nothing an earlier run counted is met.
const address = `203.0.113.${randomInt(1, 255)}-${Date.now().toString(36)}`;
const route = "GET /api/refusals-test";

// The audit log is append-only (a trigger refuses deletes): its entries stay in the worker's test database.
afterAll(async () => {
  await db().auditRefusalTally.deleteMany({ where: { address } });
  await closeDb();
});

const refuse = () => recordRefusal({ principal: null, address, route, status: 401, reason: "no credentials" });
const counted = async () =>
  (await db().auditRefusalTally.findMany({ where: { address, route } })).reduce((n, t) => n + t.count, 0);

describe("anonymous refusals", () => {
  it("a flood of one address is counted whole in a few statements, not one a refusal, with one audit entry for the minute", async () => {
    const trips = await roundTrips(async () => {
      await Promise.all(Array.from({ length: 200 }, refuse));
    });
    const tallyWrites = trips.filter((t) => t.includes('INSERT INTO "AuditRefusalTally"'));
    // Refusals that come while a write of their count is out wait for the next one, together: a
    // flood is one write, or a few (a minute that turns during it makes one more count).
    expect(tallyWrites.length).toBeGreaterThanOrEqual(1);
    expect(tallyWrites.length).toBeLessThanOrEqual(4);
    expect(await counted()).toBe(200);
    const entries = await db().auditEntry.count({ where: { clientAddress: address } });
    expect(entries).toBeGreaterThanOrEqual(1);
    expect(entries).toBeLessThanOrEqual(2);

    // Refusals after the flood's writes ended add to the same count, one write each.
    await refuse();
    await refuse();
    expect(await counted()).toBe(202);
    expect(await db().auditEntry.count({ where: { clientAddress: address } })).toBe(entries);
  });
});
