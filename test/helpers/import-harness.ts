import http from "node:http";
import type { AddressInfo } from "node:net";
import { vi } from "vitest";
import { distinctWord } from "@/lib/format/distinct-word";

/**
 * What an import test needs, against the real database and queue: the model simulator on a free
 * port, an import budget no test comes near (unless one is given), and the modules — imported only after the
 * environment is stubbed, because it is parsed once, on first use.
 */
export async function startImportHarness(options: { budgetSoftS?: number; budgetHardS?: number } = {}) {
  let handle: http.RequestListener = () => undefined;
  const server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", String(options.budgetSoftS ?? 600_000));
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", String(options.budgetHardS ?? 900_000));
  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  handle = createRouter(createModelSimulator({ errorRate: 0, timeScale: 0.0002 }).routes);
  const m = {
    db: await import("@/lib/db/client"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    runtime: await import("@/lib/runs/run-job"),
    csv: await import("@/workers/processors/csv-import"),
    log: await import("@/lib/log"),
    tenants: await import("./tenants"),
    jobs: await import("./jobs"),
  };
  const tenants: string[] = [];
  return {
    m,
    /** The model endpoint's server: close it and listen again on its port to take the model service down and back. */
    server,
    /** An import of `rows` rows (good ones unless `lineFor` writes the row) for a new tenant; its queue job removed (tests run it themselves). */
    async importOf(rows: number, label: string, lineFor: (i: number) => string | null = () => null): Promise<string> {
      const lines = ["date,amount,currency,counterparty,description"];
      for (let i = 1; i <= rows; i++)
        lines.push(
          lineFor(i) ??
            `2026-03-${String((i % 28) + 1).padStart(2, "0")},-${i}.10,EUR,REWE Markt,row ${distinctWord(i)}`,
        );
      const tenant = m.tenants.uniqueTenantSlug(label);
      tenants.push(tenant);
      const created = await m.createImport.createImport({
        tenant,
        filename: `${label}.csv`,
        bytes: new TextEncoder().encode(lines.join("\n")),
      });
      if (created.type !== "created") throw new Error(created.message);
      await m.queues.queue("imports").remove(created.jobId);
      return created.jobId;
    },
    /** Runs a job through the runtime as a worker would; resolves with the error when it throws. */
    run(jobId: string, signal = new AbortController().signal) {
      return m.runtime
        .runJob({ csv_import: m.csv.csvImport }, m.jobs.queueJobFor(jobId), signal, m.log.logger("test"))
        .catch((err: Error) => err);
    },
    /**
     * Runs a job as workers would until it is terminal: a run that gave its slot back (the row
     * `delayed` until `wakeUpAt`: a rate-limit wait, an outside service down) is run again when
     * its wake-up comes, as BullMQ's delayed set would. Resolves with the number of deferrals.
     */
    async runToEnd(jobId: string, deadlineMs = 60_000): Promise<number> {
      let deferrals = 0;
      const until = Date.now() + deadlineMs;
      while (Date.now() < until) {
        const result = await this.run(jobId);
        const row = await m.db
          .db()
          .job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true, wakeUpAt: true } });
        if (row.status !== "delayed") {
          if (result instanceof Error) throw result;
          return deferrals;
        }
        deferrals++;
        await new Promise((resolve) =>
          setTimeout(resolve, Math.max(1, (row.wakeUpAt?.getTime() ?? Date.now()) - Date.now())),
        );
      }
      throw new Error(`job ${jobId} did not end within ${deadlineMs} ms`);
    },
    async close() {
      for (const slug of tenants) await m.tenants.deleteTenant(slug);
      await m.queues.closeQueues();
      await m.redis.closeRedis();
      await m.db.closeDb();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
