import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test, users, VIEWER } from "./fixtures";

const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

test("deleting a tenant over the API: operator-only, a dry run first, refused while a job runs, then every row gone and the audit entry kept", async ({
  request,
  credentialsFor,
}) => {
  const tenant = `e2e-delete-${Date.now().toString(36)}`;
  const created = await request.post(`/api/imports?tenant=${tenant}`, {
    data: transactionsCsv(6).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  const status = async () =>
    (await sql<{ status: string }>(`select status::text from "Job" where id = $1`, [jobId]))[0]?.status;
  await expect.poll(status, { timeout: 30_000 }).toBe("completed");

  // Refused without the operator role, before anything is read or deleted.
  expect((await request.delete(`/api/tenants/${tenant}`)).status()).toBe(401);
  await credentialsFor("viewer");
  const viewerToken = users("token", VIEWER.username).trim().split("\n").pop()!;
  expect(
    (await request.delete(`/api/tenants/${tenant}`, { headers: { authorization: `Bearer ${viewerToken}` } })).status(),
  ).toBe(403);

  // How long it keeps its results is the tenant's choice: set, bad input refused, unknown tenant 404.
  const keep = await request.put(`/api/tenants/${tenant}/retention`, { data: { resultsDays: 30 }, headers: operator });
  expect(keep.status()).toBe(200);
  expect(((await keep.json()) as { message: string }).message).toBe(
    `${tenant} keeps its results 30 days after the job that made them ended; older ones are removed by the next retention pass.`,
  );
  const [chosen] = await sql<{ days: number }>(`select "resultsRetainDays" days from "Tenant" where slug = $1`, [
    tenant,
  ]);
  expect(chosen!.days).toBe(30);
  for (const data of [{ resultsDays: 0 }, { resultsDays: "a year" }, { days: 30 }])
    expect((await request.put(`/api/tenants/${tenant}/retention`, { data, headers: operator })).status()).toBe(422);
  expect(
    (
      await request.put(`/api/tenants/no-such-tenant-here/retention`, {
        data: { resultsDays: null },
        headers: operator,
      })
    ).status(),
  ).toBe(404);
  expect(
    (
      await request.put(`/api/tenants/${tenant}/retention`, {
        data: { resultsDays: null },
        headers: { authorization: `Bearer ${viewerToken}` },
      })
    ).status(),
  ).toBe(403);

  // A dry run by default: what would go, and nothing gone.
  const preview = await request.delete(`/api/tenants/${tenant}`, { headers: operator });
  expect(preview.status()).toBe(200);
  const previewBody = (await preview.json()) as { type: string; rows: Record<string, number>; message: string };
  expect(previewBody.type).toBe("preview");
  expect(previewBody.rows).toMatchObject({ Job: 1, Transaction: 6, Tenant: 1 });
  expect(previewBody.message).toMatch(
    new RegExp(
      `^Nothing deleted yet\\. Deleting ${tenant} would remove .+; repeat with \\?confirm=${tenant} to do it\\.$`,
    ),
  );
  expect(await status()).toBe("completed");

  // Bad input: a 4xx that says what is wrong, nothing deleted.
  const mismatch = await request.delete(`/api/tenants/${tenant}?confirm=someone-else`, { headers: operator });
  expect(mismatch.status()).toBe(422);
  expect((await mismatch.json()).error.code).toBe("confirm_mismatch");
  expect(
    (await request.delete(`/api/tenants/${tenant}?confirm=${tenant}&force=1`, { headers: operator })).status(),
  ).toBe(422);
  expect((await request.delete(`/api/tenants/no-such-tenant-here`, { headers: operator })).status()).toBe(404);

  // A job still open refuses the deletion.
  await sql(`update "Job" set status = 'running', "finishedAt" = null where id = $1`, [jobId]);
  const busy = await request.delete(`/api/tenants/${tenant}?confirm=${tenant}`, { headers: operator });
  expect(busy.status()).toBe(409);
  expect((await busy.json()).error.message).toMatch(/has 1 job still queued, running or waiting/);
  await sql(`update "Job" set status = 'completed', "finishedAt" = now() where id = $1`, [jobId]);

  const deleted = await request.delete(`/api/tenants/${tenant}?confirm=${tenant}`, { headers: operator });
  expect(deleted.status()).toBe(200);
  expect(((await deleted.json()) as { message: string }).message).toMatch(new RegExp(`^Deleted ${tenant}: \\d+ rows`));
  const [left] = await sql<{ tenants: string; jobs: string; transactions: string }>(
    `select (select count(*) from "Tenant" where slug = $1) tenants, (select count(*) from "Job" where id = $2) jobs,
            (select count(*) from "Transaction" where "jobId" = $2) transactions`,
    [tenant, jobId],
  );
  expect(left).toEqual({ tenants: "0", jobs: "0", transactions: "0" });
  expect((await request.get(`/api/progress/${progressToken}`)).status()).toBe(404);
  // Done is done: asking again finds no tenant.
  expect((await request.delete(`/api/tenants/${tenant}?confirm=${tenant}`, { headers: operator })).status()).toBe(404);
  // The audit log keeps who asked, the dry run and the deletion itself.
  const audit = await sql<{ action: string; result: string }>(
    `select action, result::text from "AuditEntry" where target = $1 and actor = 'admin' order by id`,
    [tenant],
  );
  expect(audit).toEqual(
    expect.arrayContaining([
      { action: "tenant.delete_preview", result: "ok" },
      { action: "tenant.delete", result: "refused" },
      { action: "tenant.delete", result: "ok" },
    ]),
  );
});

test("a tenant whose deletion was started takes no new work, answers 202 with how far it got, and the workers finish it", async ({
  request,
}) => {
  const tenant = `e2e-deleting-${Date.now().toString(36)}`;
  const upload = () =>
    request.post(`/api/imports?tenant=${tenant}`, {
      data: transactionsCsv(4).csv,
      headers: { "content-type": "text/csv" },
    });
  const created = await upload();
  expect(created.status()).toBe(201);
  const { jobId } = (await created.json()) as { jobId: string };
  await expect
    .poll(
      async () => (await sql<{ status: string }>(`select status::text from "Job" where id = $1`, [jobId]))[0]?.status,
      {
        timeout: 30_000,
      },
    )
    .toBe("completed");

  // A deletion whose request stopped right after it started (a crash, a deploy): only the mark is there.
  await sql(`update "Tenant" set "deletingAt" = now() where slug = $1`, [tenant]);

  const refused = await upload();
  expect(refused.status()).toBe(409);
  expect((await refused.json()).error).toMatchObject({
    code: "tenant_being_deleted",
    message: expect.stringMatching(new RegExp(`^${tenant} is being deleted \\(since .+\\): it takes no new work\\.`)),
  });
  const sync = await request.post("/api/syncs", { data: { tenant, family: "orders" }, headers: operator });
  expect(sync.status()).toBe(409);
  expect((await sync.json()).error.code).toBe("tenant_being_deleted");

  // The dry run says it is under way; the workers finish it (every second here), then the tenant is gone.
  const progress = async () => (await request.delete(`/api/tenants/${tenant}`, { headers: operator })).status();
  const first = await request.delete(`/api/tenants/${tenant}`, { headers: operator });
  if (first.status() === 202) {
    const body = (await first.json()) as { type: string; message: string };
    expect(body.type).toBe("deleting");
    expect(body.message).toMatch(
      new RegExp(`^${tenant} is being deleted \\(since .+\\): .+ removed so far\\. It goes on by itself`),
    );
  } else expect(first.status()).toBe(404);
  await expect.poll(progress, { timeout: 30_000 }).toBe(404);
  const [left] = await sql<{ tenants: string; jobs: string }>(
    `select (select count(*) from "Tenant" where slug = $1) tenants, (select count(*) from "Job" where id = $2) jobs`,
    [tenant, jobId],
  );
  expect(left).toEqual({ tenants: "0", jobs: "0" });
  // The name is free again: a new upload starts a new tenant.
  expect((await upload()).status()).toBe(201);
});
