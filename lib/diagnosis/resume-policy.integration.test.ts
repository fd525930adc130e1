import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { closeQueues, queue } from "@/lib/queues/queues";
import { QUEUE_NAMES, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import { RateLimitDefer } from "@/lib/ratelimit/errors";
import { closeRedis } from "@/lib/redis/client";
import { sleep } from "@/lib/time";
import { makeJob, queueJobFor } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import type { Processor } from "@/lib/runs/processor";
import { runJob } from "@/lib/runs/run-job";
import { cancelJob } from "@/lib/actions/cancel";
import { getCustomerProgress } from "@/lib/progress/customer-progress";
import { JobFailed } from "@/lib/core/signals";
import { eventCategory } from "@/lib/reports/forensics";
import { markStuckJobsFailed } from "@/lib/actions/mark-failed";
import {
  AUTO_RESUME,
  AUTO_RESUMED_EVENT,
  END_CAUSES,
  endCauseOf,
  OPERATOR_STATUSES,
  RESUME_POLICY,
  type EndCause,
} from "./resume-policy";
import { retryJob } from "@/lib/actions/retry";
import { commitItem } from "@/lib/runs/commit";
import { finalizeJob } from "@/lib/runs/finalize";
import { reapStuckJobs } from "@/lib/runs/reaper";
import { listAwaitingOperator, scheduledAutoResume } from "@/lib/diagnosis/awaiting-operator";
import { waitFor } from "@/test/helpers/wait";
import { isTerminal, type JobStatus } from "@/lib/core/job-statuses";
import { processMetrics } from "@/lib/metrics/metrics";

const autoResumedCount = async (kind: string) =>
  (await processMetrics().registry.getSingleMetric("bounded_jobs_auto_resumed_total")!.get()).values.find(
    (v) => v.labels.kind === kind,
  )?.value ?? NaN;

/**
 * Who resumes what, against the real behaviour: each way a job can end is produced by the code
 * that ends it (the runtime's limits, the deferral's maximum age, the reaper, the operator's
 * actions), then the test reads what the customer is told and checks what the platform really
 * does next — a reaper pass and the queue — so no sentence promises what nothing does.
 */

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000009",
  username: "policy-oncall",
  role: "operator",
  via: "token",
};
const log = logger("test");
const tenants: string[] = [];
const MIN = 60_000;

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

async function newJob(kind: JobKind, queueName: string, budget = { softMs: 200_000, hardMs: 5_000_000 }) {
  const slug = uniqueTenantSlug("policy");
  tenants.push(slug);
  const job = await makeJob(slug, { kind, queue: queueName, total: 10, ...budget });
  const { progressToken } = await db().job.findUniqueOrThrow({
    where: { id: job.id },
    select: { progressToken: true },
  });
  return { ...job, progressToken };
}

/** Runs one attempt through the real runtime (no lock token: a failure is thrown for the caller, which the test ignores). */
async function run(kind: JobKind, queueName: string, id: string, processor: Processor) {
  await runJob({ [kind]: processor }, queueJobFor(id, queueName, kind), new AbortController().signal, log).catch(
    () => undefined,
  );
}

const untilAborted: Processor = ({ signal }) => sleep(10 * MIN, signal);

interface Case {
  name: string;
  cause: EndCause;
  status: JobStatus;
  /** Drives a real job into the ending; returns its id and progress token. */
  make(): Promise<{ id: string; progressToken: string; queue: string }>;
}

const CASES: Case[] = [
  {
    name: "an import that ran out of its budget",
    cause: "over_budget_splittable",
    status: "timed_out",
    async make() {
      const j = await newJob("csv_import", "imports");
      await run("csv_import", "imports", j.id, untilAborted);
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "an interactive agent run far too big for its budget",
    cause: "too_big_cannot_split",
    status: "timed_out",
    async make() {
      const j = await newJob("agent_run", "agent-interactive");
      await run("agent_run", "agent-interactive", j.id, untilAborted);
      return { ...j, queue: "agent-interactive" };
    },
  },
  {
    name: "a sync whose next rate-limit window falls past its maximum age",
    cause: "max_age",
    status: "timed_out",
    async make() {
      const j = await newJob("marketplace_sync", "marketplace-sync", { softMs: 600_000, hardMs: 900_000 });
      // 6 h of production time is 21.6 s here: a 60 s wait cannot fit.
      await run("marketplace_sync", "marketplace-sync", j.id, async () => {
        throw new RateLimitDefer(60_000, `statistics:policy`);
      });
      return { ...j, queue: "marketplace-sync" };
    },
  },
  {
    name: "a run that ignored its soft limit, stopped at the hard limit",
    cause: "hard_limit",
    status: "killed",
    async make() {
      const j = await newJob("csv_import", "imports", { softMs: 50_000, hardMs: 100_000 });
      await run("csv_import", "imports", j.id, () => sleep(3_000));
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a card generation whose image provider failed every retry before its breaker opened",
    cause: "outside_service",
    status: "failed",
    async make() {
      const j = await newJob("card_generation", "generations");
      await run("card_generation", "generations", j.id, async () => {
        // The words workers/processors/card-generation.ts writes when the provider's retries are spent.
        throw new JobFailed(
          "The card could not be generated: the image provider's poll failed 3 times (last: the image provider answered HTTP 503). The reserved unit was returned to the pack.",
        );
      });
      return { ...j, queue: "generations" };
    },
  },
  {
    name: "a job whose input it cannot get past (poison input)",
    cause: "job_failed",
    status: "failed",
    async make() {
      const j = await newJob("csv_import", "imports");
      await run("csv_import", "imports", j.id, async () => {
        throw new JobFailed("The uploaded file is missing, so the import cannot run. Upload the file again.");
      });
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job that hit an internal error",
    cause: "internal_error",
    status: "failed",
    async make() {
      const j = await newJob("bulk_ocr", "documents");
      await run("bulk_ocr", "documents", j.id, async () => {
        throw new TypeError("Cannot read properties of undefined");
      });
      return { ...j, queue: "documents" };
    },
  },
  {
    name: "a job whose worker died once more than the bound of resumes",
    cause: "crash_bound",
    status: "failed",
    async make() {
      const j = await newJob("csv_import", "imports", { softMs: 10_000, hardMs: 20_000 });
      const old = new Date(Date.now() - 2 * MIN);
      await db().job.update({
        where: { id: j.id },
        data: { status: "running", attempt: 4, crashResumes: 3, heartbeatAt: old, attemptStartedAt: old },
      });
      await reapStuckJobs();
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job of a queue no worker consumes",
    cause: "no_worker",
    status: "failed",
    async make() {
      const j = await newJob("csv_import", "nowhere");
      await db().job.update({
        where: { id: j.id },
        data: { createdAt: new Date(Date.now() - 2 * MIN), heartbeatAt: null },
      });
      await reapStuckJobs();
      return { ...j, queue: "nowhere" };
    },
  },
  {
    name: "a job an operator marked failed from the stuck page",
    cause: "marked_failed",
    status: "failed",
    async make() {
      const j = await newJob("csv_import", "imports");
      // Open, but its queue job is gone: in "lost from the queue".
      await db().job.update({ where: { id: j.id }, data: { createdAt: new Date(Date.now() - MIN) } });
      await markStuckJobsFailed("lost_from_queue", { jobIds: [j.id] }, operator);
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job an earlier reaper abandoned",
    cause: "abandoned",
    status: "abandoned",
    async make() {
      const j = await newJob("csv_import", "imports");
      await finalizeJob(j.id, 0, {
        status: "abandoned",
        message:
          "Abandoned after 0 of 10 items: the queue no longer runs it (queue state: unknown). Retry to continue from where it stopped.",
      });
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job that completed with item failures",
    cause: "item_failures",
    status: "completed_with_errors",
    async make() {
      const j = await newJob("csv_import", "imports");
      await run("csv_import", "imports", j.id, async ({ run: r }) => {
        await commitItem(r.jobId, r.attempt, 1, { ok: false, row: 1, reason: "date must look like 2026-01-31" });
      });
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job an operator cancelled",
    cause: "cancelled",
    status: "cancelled",
    async make() {
      const j = await newJob("csv_import", "imports");
      await cancelJob(j.id, operator);
      return { ...j, queue: "imports" };
    },
  },
  {
    name: "a job that completed",
    cause: "completed",
    status: "completed",
    async make() {
      const j = await newJob("csv_import", "imports");
      await run("csv_import", "imports", j.id, async () => undefined);
      return { ...j, queue: "imports" };
    },
  },
];

const CONTINUES_BY_ITSELF = /continues by itself|will be resumed|goes on by itself|send anything again/i;

describe("who resumes what: every way a job ends, produced for real, told truthfully and followed by what the policy says", () => {
  it.each(CASES)("$name: ends $status ($cause)", async (c) => {
    const { id, progressToken, queue: queueName } = await c.make();
    const row = await db().job.findUniqueOrThrow({
      where: { id },
      select: { status: true, kind: true, message: true, attempt: true, _count: { select: { children: true } } },
    });
    expect(row.status, row.message ?? "").toBe(c.status);
    expect(
      endCauseOf({ status: row.status, kind: row.kind, message: row.message, hasParts: row._count.children > 0 }),
    ).toBe(c.cause);
    const rule = RESUME_POLICY[c.cause];

    // What the customer reads.
    const progress = (await getCustomerProgress(progressToken))!;
    const told = `${progress.message} ${progress.next ?? ""}`;
    const scheduled = await scheduledAutoResume(id);
    if (rule.resumes === "platform") {
      expect(scheduled).not.toBeNull();
      expect(progress.next).toContain(`It continues by itself at about ${scheduled!.toISOString().slice(11, 16)} UTC`);
      expect(told).not.toContain("Our team");
    } else {
      expect(scheduled).toBeNull();
      expect(told).not.toMatch(CONTINUES_BY_ITSELF);
      // Told "our team will continue it" only while a person is asked to (it awaits an operator);
      // one a person already ended (marked failed) is closed, and its customer reads that.
      if (rule.resumes === "operator" && rule.awaits)
        expect(progress.next).toMatch(
          /Our team has been told and will continue it; you don't need to (upload|start it) again\./,
        );
      else if (rule.resumes === "operator")
        expect(progress.next).toMatch(/Our team has looked into it and closed it: nothing more will be done with it\./);
      else expect(told).not.toContain("Our team");
    }

    // What the operator is shown: nothing while the platform will resume it.
    const awaiting = await listAwaitingOperator(new Date(), [id]);
    expect(awaiting.map((j) => j.cause)).toEqual(rule.awaits && rule.resumes !== "platform" ? [c.cause] : []);
    if (awaiting.length) expect(awaiting[0]!.action).toBe(rule.action);

    if (rule.resumes === "platform") {
      // What the platform does next: when it said, the reaper resumes it as a retry would, and its queue job waits for a worker.
      await waitFor(() => scheduled!.getTime() <= Date.now(), {
        timeoutMs: 10_000,
        what: "the scheduled resume to be due",
      });
      const { kind } = await db().job.findUniqueOrThrow({ where: { id }, select: { kind: true } });
      const resumedBefore = await autoResumedCount(kind);
      await reapStuckJobs();
      expect((await db().job.findUniqueOrThrow({ where: { id }, select: { status: true } })).status).toBe("queued");
      expect(await db().jobEvent.count({ where: { jobId: id, type: AUTO_RESUMED_EVENT } })).toBe(1);
      // Counted where the objective's ratios take its failed finish out again (ops/prometheus/alerts.yml).
      expect(await autoResumedCount(kind)).toBe(resumedBefore + 1);
      // On the job's timeline the platform's resume reads as an attempt, as a person's retry does.
      expect(eventCategory(AUTO_RESUMED_EVENT)).toBe("attempt");
      expect(["waiting", "prioritized"]).toContain(await queue(queueName as QueueName).getJobState(id));
      await queue(queueName as QueueName).remove(id);
      return;
    }

    // What the platform does next: nothing. A reaper pass leaves it as it is, and no queue job waits to run it.
    await reapStuckJobs();
    const after = await db().job.findUniqueOrThrow({ where: { id }, select: { status: true, attempt: true } });
    expect(after).toEqual({ status: row.status, attempt: row.attempt });
    if ((QUEUE_NAMES as string[]).includes(queueName)) {
      expect(["waiting", "delayed", "prioritized", "active"]).not.toContain(
        await queue(queueName as QueueName).getJobState(id),
      );
    }

    // An operator's retry is what continues one that waits: it leaves the group at once.
    if (rule.awaits) {
      expect((await retryJob(id, operator)).type).toBe("retried");
      expect(await listAwaitingOperator(new Date(), [id])).toEqual([]);
      await queue(queueName as QueueName).remove(id);
    }
  });

  it("a worker that dies is the platform's to resume: the reaper queues the run again and the customer reads that it resumes", async () => {
    const j = await newJob("csv_import", "imports", { softMs: 10_000, hardMs: 20_000 });
    const old = new Date(Date.now() - 2 * MIN);
    await db().job.update({
      where: { id: j.id },
      data: { status: "running", attempt: 1, processed: 4, cursor: 4, heartbeatAt: old, attemptStartedAt: old },
    });
    await reapStuckJobs();
    const row = await db().job.findUniqueOrThrow({ where: { id: j.id }, select: { status: true, crashResumes: true } });
    expect(row).toEqual({ status: "queued", crashResumes: 1 });
    // Scheduled for real: its queue job waits for a worker.
    expect(["waiting", "prioritized"]).toContain(await queue("imports").getJobState(j.id));
    const told = (await getCustomerProgress(j.progressToken))!;
    expect(told.message).toMatch(/^Resuming where it stopped: 6 rows to go\b.*The 4 rows already imported are kept\.$/);
    expect(`${told.message} ${told.next ?? ""}`).not.toContain("Our team");
    expect(await listAwaitingOperator(new Date(), [j.id])).toEqual([]);
    await queue("imports").remove(j.id);
  });

  it(`the platform's resumes are bounded: after ${AUTO_RESUME.delaysMs.length} the job waits for a person, who is told, and so is the customer`, async () => {
    const j = await newJob("card_generation", "generations");
    await run("card_generation", "generations", j.id, async () => {
      throw new JobFailed(
        "The card could not be generated: the image provider's submit failed 3 times (last: the image provider could not be reached (ECONNREFUSED)). The reserved unit was returned to the pack.",
      );
    });
    // As if the platform had resumed it the most times it does, each resume ending the same way.
    for (let i = 0; i < AUTO_RESUME.delaysMs.length; i++) {
      await db().jobEvent.create({
        data: {
          jobId: j.id,
          type: AUTO_RESUMED_EVENT,
          attempt: 1,
          message: "Resumed by the platform",
          at: new Date(Date.now() - 1000),
        },
      });
    }
    expect(await scheduledAutoResume(j.id)).toBeNull();
    await reapStuckJobs();
    expect((await db().job.findUniqueOrThrow({ where: { id: j.id }, select: { status: true } })).status).toBe("failed");
    expect((await listAwaitingOperator(new Date(), [j.id])).map((a) => a.cause)).toEqual(["outside_service"]);
    const told = (await getCustomerProgress(j.progressToken))!;
    expect(told.next).toContain("Our team has been told and will continue it; you don't need to start it again.");
    expect(`${told.message} ${told.next}`).not.toMatch(CONTINUES_BY_ITSELF);
    // An operator's retry starts the count again.
    expect((await retryJob(j.id, operator)).type).toBe("retried");
    await queue("generations").remove(j.id);
  });

  it("every end cause is produced above (a split job's end apart: its parts are listed), and every short ending waits for a person", () => {
    const produced = new Set<EndCause>([...CASES.map((c) => c.cause), "parts_ended"]);
    expect([...produced].sort()).toEqual([...END_CAUSES].sort());
    // Only an outside service's failures are the platform's to resume; every other short ending is a person's.
    for (const status of OPERATOR_STATUSES) {
      for (const kind of ["csv_import", "agent_run", "marketplace_sync", "card_generation"]) {
        for (const message of [
          null,
          "Timed out after 3 of 10 rows (budget 600 s).",
          "The card could not be generated: the image provider answered HTTP 400: prompt refused. The reserved unit was returned to the pack.",
          "The card could not be generated: the image provider answered something unexpected. The reserved unit was returned to the pack.",
        ]) {
          for (const hasParts of [false, true]) {
            const cause = endCauseOf({ status, kind, message, hasParts })!;
            expect(RESUME_POLICY[cause].resumes, `${status} ${kind} ${message}`).toBe("operator");
          }
        }
      }
    }
    const card = (why: string) =>
      endCauseOf({
        status: "failed",
        kind: "card_generation",
        message: `The card could not be generated: ${why}. The reserved unit was returned to the pack.`,
        hasParts: false,
      });
    expect(card("the image provider could not render the card (the render failed on the provider's side)")).toBe(
      "outside_service",
    );
    expect(
      card(
        "the image provider's download failed 2 times (last: ProviderError: download attempt 2 timed out after 1 min)",
      ),
    ).toBe("outside_service");
    const page = (why: string) =>
      endCauseOf({
        status: "failed",
        kind: "marketplace_sync",
        message: `Could not read page 7 of statistics: ${why}. Retry to resume at this page.`,
        hasParts: false,
      });
    expect(page("the marketplace failed (HTTP 503: upstream down)")).toBe("outside_service");
    expect(page("the marketplace did not answer within 30 s")).toBe("outside_service");
    expect(page("the marketplace could not be reached (ECONNREFUSED)")).toBe("outside_service");
    expect(page("no such seller")).toBe("job_failed");
    expect(page("the marketplace answered HTTP 404")).toBe("job_failed");
    for (const status of ["queued", "running", "delayed"] as const)
      expect(endCauseOf({ status, kind: "csv_import", message: null, hasParts: false })).toBeNull();
    expect(isTerminal("timed_out")).toBe(true);
  });
});
