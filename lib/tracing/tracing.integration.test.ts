import http from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { route } from "@/lib/http/api";
import { attemptRequest } from "@/lib/http/outbound";
import { createJob } from "@/lib/jobs/create";
import { logger } from "@/lib/log";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis } from "@/lib/redis/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { waitFor } from "@/test/helpers/wait";
import { queueProcessor } from "@/workers/queue-processor";
import { parseTraceparent } from "./traceparent";
import { currentTraceHeaders, startTracing } from "./tracing";

/**
 * One trace from a web request to the job it creates and the job's outbound call: spans exported
 * to memory, the job's data carrying the request's `traceparent`, the outbound request carrying
 * its own span as `traceparent`, and every log line of the run naming the job's tenant.
 */
vi.hoisted(() => {
  process.env.LOG_LEVEL = "info";
  // Budgets no cold start can reach at the test time scale.
  process.env.BOUNDED_BUDGET_IMPORTS_SOFT_S = "100000";
  process.env.BOUNDED_BUDGET_IMPORTS_HARD_S = "200000";
});
/** Lines of the process's own loggers (modules that log inside a job without its child logger). */
const processLines = vi.hoisted(() => [] as string[]);
vi.mock("pino", async (importOriginal) => {
  const real = (await importOriginal<typeof import("pino")>()).default;
  const { Writable: Sink } = await import("node:stream");
  const sink = new Sink({
    write(chunk, _encoding, done) {
      processLines.push(String(chunk));
      done();
    },
  });
  // Only the project's logger (created with options alone) is captured; the test's own keeps its destination.
  return {
    default: Object.assign(
      (options: import("pino").LoggerOptions, destination?: import("pino").DestinationStream) =>
        real(options, destination ?? sink),
      real,
    ),
  };
});

const exporter = new InMemorySpanExporter();
let stopTracing: () => Promise<void>;
let server: http.Server;
let serverUrl: string;
const received: (string | undefined)[] = [];
const tenant = uniqueTenantSlug("trace");

beforeAll(async () => {
  stopTracing = await startTracing({ exporter });
  server = http.createServer((request, response) => {
    received.push(request.headers.traceparent as string | undefined);
    response.end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/things`;
});

afterAll(async () => {
  await stopTracing();
  server.close();
  await deleteTenant(tenant);
  await closeQueues();
  await closeRedis();
  await closeDb();
});

describe("a trace from request to job to outbound call", () => {
  it("puts the request's trace id on the job's run span and its outbound call span, and sends traceparent", async () => {
    const start = route(
      "public",
      async () => Response.json(await createJob({ kind: "csv_import", tenantSlug: tenant, total: 3 })),
      "POST /api/test-jobs",
    );
    const response = await start(new Request("http://localhost/api/test-jobs", { method: "POST" }), {});
    const { jobId, progressToken } = (await response.json()) as { jobId: string; progressToken: string };

    // The queue job as a tool reading the queue sees it: named by kind, readable data, no secret.
    const queueJob = (await queue("imports").getJob(jobId))!;
    expect(queueJob.name).toBe("csv_import");
    const { tenantId } = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { tenantId: true } });
    expect(queueJob.data).toEqual({
      jobId,
      kind: "csv_import",
      tenantId,
      total: 3,
      traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
    });
    expect(JSON.stringify(queueJob.data)).not.toContain(progressToken);

    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: "debug" },
      new Writable({
        write: (chunk, _e, done) => {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    let headersInJob: Record<string, string> = {};
    const processor = queueProcessor("imports", {
      processors: {
        csv_import: async (ctx) => {
          headersInJob = currentTraceHeaders();
          ctx.log.info("calling out");
          logger("elsewhere").info("a module's own logger inside the job");
          const attempt = await attemptRequest({ url: new URL(serverUrl), signal: ctx.signal });
          expect(attempt.ok).toBe(true);
          // As if two items had committed: the queue job's progress mirrors the row's counts.
          await db().job.update({ where: { id: jobId }, data: { processed: 2, failed: 1 } });
          return {};
        },
      },
      shutdown: new AbortController().signal,
      log,
    });
    await processor(queueJob);
    // The final counts reach the queue job just after the run (best effort, not awaited by it).
    await waitFor(
      async () =>
        JSON.stringify((await queue("imports").getJob(jobId))?.progress) ===
        JSON.stringify({ processed: 2, failed: 1, total: 3 }),
      {
        what: "the final counts on the queue job",
        timeoutMs: 10_000,
      },
    );
    await queueJob.remove();

    const spans = exporter.getFinishedSpans();
    const request = spans.find((s) => s.name === "POST /api/test-jobs")!;
    const run = spans.find((s) => s.name === "run csv_import")!;
    const call = spans.find((s) => s.name.startsWith("GET 127.0.0.1:"))!;
    expect(request && run && call).toBeTruthy();
    const traceId = request.spanContext().traceId;
    expect(run.spanContext().traceId).toBe(traceId);
    expect(run.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(call.spanContext().traceId).toBe(traceId);
    expect(call.parentSpanContext?.spanId).toBe(run.spanContext().spanId);

    // The service was told which span called it; code in the job can hand the trace on too.
    expect(received).toHaveLength(1);
    expect(parseTraceparent(received[0])).toEqual({ traceId, spanId: call.spanContext().spanId, sampled: true });
    expect(parseTraceparent(headersInJob.traceparent)?.traceId).toBe(traceId);

    // Every line the run wrote names the tenant, the attempt and the trace.
    const runLines = lines.filter((l) => l.jobId === jobId);
    expect(runLines.length).toBeGreaterThan(1);
    for (const line of runLines) expect(line).toMatchObject({ tenantId, kind: "csv_import", attempt: 1, traceId });
    expect(lines.find((l) => l.msg === "calling out")).toMatchObject({ tenantId, jobId });
    const elsewhere = processLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.name === "elsewhere");
    expect(elsewhere).toMatchObject({ tenantId, traceId });

    expect((await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true } })).status).toBe(
      "completed_with_errors",
    );
  });

  it("exports nothing and still hands the caller's trace on when no exporter is started", async () => {
    await stopTracing();
    exporter.reset();
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    let inside: Record<string, string> = {};
    const handler = route(
      "public",
      async () => {
        inside = currentTraceHeaders();
        return Response.json({});
      },
      "GET /api/test-trace",
    );
    await handler(
      new Request("http://localhost/api/test-trace", { headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } }),
      {},
    );
    expect(parseTraceparent(inside.traceparent)).toMatchObject({ traceId, sampled: true });
    expect(exporter.getFinishedSpans()).toEqual([]);
    stopTracing = await startTracing({ exporter });
  });
});
