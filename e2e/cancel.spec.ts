import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test, users, VIEWER } from "./fixtures";

// A running import cancelled from its job page, and retried: e2e/cancel-import.spec.ts.
const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
/** Anonymous refusals of the cancel route counted so far: a flood costs one audit entry a minute, the count is exact. */
const anonymousRefusals = async () =>
  Number(
    (
      await sql<{ n: string }>(
        `select coalesce(sum(count), 0) n from "AuditRefusalTally" where route = 'POST /api/jobs/:id/cancel' and status = 401`,
      )
    )[0]!.n,
  );
const jobRow = async (jobId: string) =>
  (
    await sql<{ status: string; processed: number; cursor: number; message: string | null }>(
      `select status::text, processed, cursor, message from "Job" where id = $1`,
      [jobId],
    )
  )[0]!;

test("the cancel API: operator-only and audited, a queued job is cancelled at once, a finished one refused with the reason, bad input a 4xx", async ({
  request,
  credentialsFor,
}) => {
  await credentialsFor("viewer");
  const viewerToken = users("token", VIEWER.username).trim().split("\n").pop()!;
  const created = await request.post(`/api/imports?tenant=e2e-cancel-api`, {
    data: transactionsCsv(5).csv,
    headers: { "content-type": "text/csv" },
  });
  const { jobId } = (await created.json()) as { jobId: string };

  const anonymousBefore = await anonymousRefusals();
  expect((await request.post(`/api/jobs/${jobId}/cancel`, { data: {} })).status()).toBe(401);
  // Counted in this minute's tally of the route and 401, whoever took the minute's one audit entry.
  await expect.poll(anonymousRefusals, { message: "the 401 in AuditRefusalTally" }).toBe(anonymousBefore + 1);
  expect(
    (
      await request.post(`/api/jobs/${jobId}/cancel`, { data: {}, headers: { authorization: `Bearer ${viewerToken}` } })
    ).status(),
  ).toBe(403);
  const bad = await request.post(`/api/jobs/${jobId}/cancel`, {
    data: Buffer.from("{not json"),
    headers: { ...operator, "content-type": "application/json" },
  });
  expect(bad.status()).toBe(400);
  const unknownField = await request.post(`/api/jobs/${jobId}/cancel`, { data: { why: "x" }, headers: operator });
  expect(unknownField.status()).toBe(422);
  expect((await unknownField.json()).error.code).toBeTruthy();
  const unknown = await request.post(`/api/jobs/00000000-0000-4000-8000-000000000000/cancel`, {
    data: {},
    headers: operator,
  });
  expect(unknown.status()).toBe(404);
  expect((await request.post(`/api/jobs/not-a-job/cancel`, { data: {}, headers: operator })).status()).toBe(404);

  // Five rows finish in a moment: by now it completed (or is about to), and a cancel says so.
  await expect.poll(async () => (await jobRow(jobId)).status, { timeout: 30_000 }).toBe("completed");
  const done = await request.post(`/api/jobs/${jobId}/cancel`, { data: {}, headers: operator });
  expect(done.status()).toBe(409);
  expect(await done.json()).toEqual({
    error: {
      code: "job_not_cancellable",
      message: "This job cannot be cancelled. It already completed: there is nothing left to stop.",
    },
  });

  // A job still waiting for a worker (made to wait: its row queued again, its queue job gone) is cancelled at once.
  await sql(`update "Job" set status = 'queued', "finishedAt" = null where id = $1`, [jobId]);
  const cancelled = await request.post(`/api/jobs/${jobId}/cancel`, {
    data: { reason: "not needed" },
    headers: operator,
  });
  expect(cancelled.status()).toBe(200);
  expect(await cancelled.json()).toMatchObject({ type: "cancelled", status: "cancelled", jobId });
  expect((await jobRow(jobId)).status).toBe("cancelled");
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.cancel' and target = $1 order by id`,
    [jobId],
  );
  // Every known caller's call is an entry of its own: the viewer's 403, the operator's 400, 422, 409 and the cancel.
  expect(audit.filter((a) => a.actor !== "anonymous")).toEqual([
    { actor: VIEWER.username, result: "refused" },
    ...Array.from({ length: 3 }, () => ({ actor: "admin", result: "refused" })),
    { actor: "admin", result: "ok" },
  ]);
  // The anonymous 401 is an entry only when it was the minute's first for this address, route and
  // status (another test's may have been); its count in the tally is checked above either way.
  expect([[], [{ actor: "anonymous", result: "refused" }]]).toContainEqual(
    audit.filter((a) => a.actor === "anonymous"),
  );
});
