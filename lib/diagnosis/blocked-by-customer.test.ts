import { describe, expect, it } from "vitest";
import { BLOCKED_BY_TYPES, type BlockedBy, type BlockedByDetail } from "./blocked-by";
import { customerWaitSentence } from "./blocked-by-customer";
import { OPERATOR_WORDS } from "@/lib/progress/customer-progress";

const since = "2026-12-04T05:12:03.000Z";
const blocked = (detail: BlockedByDetail, until?: string): BlockedBy => ({
  type: detail.type,
  message: "operator words",
  since,
  ...(until ? { until } : {}),
  detail,
});

const behind = (ahead: number, aheadOwn: number | null, busySlots = 4, slots = 4): BlockedByDetail => ({
  type: "behind_jobs",
  queue: "imports",
  ahead,
  aheadOwn,
  aheadOthers: [],
  busySlots,
  slots,
});

/** One of every cause, with the facts a real answer carries. */
const EVERY: BlockedBy[] = [
  blocked({ type: "queue_paused", queue: "imports", pausedBy: "alice" }),
  blocked({ type: "no_worker", queue: "imports" }),
  blocked({ type: "quota_empty", packSize: 10 }),
  blocked({
    type: "service_down",
    service: "model",
    serviceName: "the model service",
    error: "connect ECONNREFUSED",
    answersAgain: false,
    misconfigured: false,
  }),
  blocked({
    type: "service_down",
    service: "model",
    serviceName: "the model service",
    error: "misconfigured: HTTP 401: Incorrect API key provided: [key].",
    answersAgain: false,
    misconfigured: true,
  }),
  blocked({
    type: "service_down",
    service: "model",
    serviceName: "the model service",
    error: null,
    answersAgain: true,
    misconfigured: false,
  }),
  blocked({ type: "tenant_share", provider: "model", held: 16, share: 16, concurrency: 32, tenants: 2 }),
  blocked({ type: "provider_slots", provider: "model", inFlight: 32, concurrency: 32 }),
  blocked({ type: "rate_limit", window: "statistics:t-1", family: "statistics" }, "2026-12-04T05:13:00.000Z"),
  blocked({
    type: "behind_jobs",
    queue: "imports",
    ahead: 8,
    aheadOwn: 3,
    aheadOthers: [{ tenant: "t-2", jobs: 5 }],
    busySlots: 4,
    slots: 4,
  }),
  blocked(behind(0, 0)),
];

describe("a waiting job's cause in its customer's words", () => {
  it("covers every cause, and no sentence uses the operators' words (queue, worker, tenant, budget, …)", () => {
    expect(new Set(EVERY.map((b) => b.type))).toEqual(new Set(BLOCKED_BY_TYPES));
    for (const b of EVERY) {
      const sentence = customerWaitSentence(b, "csv_import", new Date("2026-12-04T05:12:13.000Z"));
      expect(sentence, b.type).not.toMatch(OPERATOR_WORDS);
      expect(sentence, b.type).toMatch(/^[A-Z].*\.$/);
    }
  });

  it("a service that refuses our requests is not said to be silent: it refuses them, and the job goes on once it accepts them", () => {
    const refusing = customerWaitSentence(
      EVERY.find((b) => b.detail.type === "service_down" && b.detail.misconfigured)!,
      "csv_import",
    );
    expect(refusing).toBe(
      "Waiting for an outside service we rely on, which has refused our requests since 05:12 UTC. It goes on by itself as soon as it accepts them again; you do not need to send anything again.",
    );
    expect(refusing).not.toMatch(/not answered/);
  });

  it("counts the customer's own jobs ahead in their words: 3 other files of yours, then the others'", () => {
    expect(customerWaitSentence(blocked(behind(3, 3)), "csv_import")).toBe(
      "Waiting for 3 other files of yours to go first; it starts right after.",
    );
    expect(customerWaitSentence(blocked(behind(8, 3)), "csv_import")).toBe(
      "Waiting for 3 other files of yours and 5 from other customers to go first; it starts right after.",
    );
    expect(customerWaitSentence(blocked(behind(1, 1)), "agent_run")).toBe(
      "Waiting for 1 other run of yours to go first; it starts right after.",
    );
    expect(customerWaitSentence(blocked(behind(5, 0)), "csv_import")).toBe(
      "Waiting for 5 jobs from other customers to go first; it starts right after.",
    );
    expect(customerWaitSentence(blocked(behind(0, 0, 2, 4)), "csv_import")).toBe("Starting in a moment.");
  });

  it("says how long a rate-limit window still lasts, in production time, and when an outside service stopped answering", () => {
    const window = blocked(
      { type: "rate_limit", window: "statistics:t-1", family: "statistics" },
      "2026-12-04T05:12:00.047Z",
    );
    // 47 ms of real time at a time scale of 0.001 is 47 production seconds.
    expect(customerWaitSentence(window, "marketplace_sync", new Date("2026-12-04T05:12:00.000Z"), 0.001)).toBe(
      "Waiting 47 s for the marketplace's rate limit; it goes on by itself.",
    );
    expect(customerWaitSentence(EVERY[3]!, "csv_import")).toContain("which has not answered since 05:12 UTC");
  });
});
