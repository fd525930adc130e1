import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Batch, BatchRequestCounts } from "openai/resources/batches";
import type { FileObject } from "openai/resources/files";
import { z } from "zod";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { chatCompletionRequestSchema, MAX_BATCH_REQUESTS, type ChatCompletionRequest } from "@/lib/modelcalls/schemas";
import { countPromptTokens } from "@/lib/modelcalls/tokens";
import { scaled } from "@/lib/time";
import type { SimulatorFaults } from "./faults";
import { completion, modelRefusalsOf, simulateAnswer, type ModelSimulatorOptions } from "./model";
import { completionLimitSchema, type ModelRefusals } from "./model-refusals";
import { errorBody, HttpError, readJson, sendJson, type RequestContext, type Route } from "./router";

const log = logger("simulators.model-batches");

/**
 * The model simulator's batch service, in the shapes of OpenAI's Batch API as the official client
 * reads them: `POST /v1/files` (a JSONL file of chat-completion requests, purpose `batch`),
 * `GET /v1/files/:id` and `/v1/files/:id/content`, `POST /v1/batches`, `GET /v1/batches/:id`,
 * `POST /v1/batches/:id/cancel`. Each request is answered as `POST /v1/chat/completions` would
 * answer it (the same answer, the same `usage`), over a turnaround drawn in production time and
 * scaled like every simulated duration. State is in memory, computed from the clock when asked:
 * no timers run.
 */

/**
 * A batch's turnaround in production ms: most batches are back in minutes, some take hours, and
 * a few are not done within the 24 h completion window and expire. A lognormal body (median
 * 6.6 min, σ 1.51) kept under the window, and a 3 % share that expires: together a median of
 * ≈ 7 min and 90 % within an hour, as the hosted batch APIs turn small batches around outside peak
 * hours (their promise is only "within 24 h").
 */
export const BATCH_TURNAROUND = {
  medianMs: 6.6 * 60_000,
  sigma: 1.51,
  /** Share of batches that do not finish within the window. */
  expireShare: 0.03,
  /** The completion window, `24h`: the only one OpenAI offers. */
  windowMs: 24 * 3_600_000,
} as const;

/**
 * One batch's turnaround in production ms (not yet time-scaled); beyond `BATCH_TURNAROUND.windowMs`
 * for a batch that expires (the time it would have needed: 1–2 windows). Pure given `random`.
 */
export function sampleBatchTurnaroundMs(random: () => number = Math.random): number {
  const { medianMs, sigma, expireShare } = BATCH_TURNAROUND;
  if (random() < expireShare) return expiringTurnaroundMs(random);
  // Box–Muller; 1 - random() is in (0, 1], so the logarithm stays finite.
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.min(BATCH_TURNAROUND.windowMs * 0.98, medianMs * Math.exp(sigma * z));
}

/**
 * The turnaround of a batch that expires: 1.1–2 windows, so that its last requests are still
 * undone when the window closes (just past one window, its finalizing phase would already have
 * begun, every request done, and the "expired" batch would have nothing to expire).
 */
function expiringTurnaroundMs(random: () => number): number {
  return BATCH_TURNAROUND.windowMs * (1.1 + 0.9 * random());
}

/** Validating (at the start) and finalizing (at the end) each take 5 % of a turnaround, at most this (production ms). */
const PHASE_MAX_MS = 60_000;
/** How long a cancelled batch stays `cancelling` (production ms). */
const CANCELLING_MS = 30_000;
/** A request's line at most (bytes): a chat-completion request body's limit. */
const MAX_LINE_BYTES = 1024 * 1024;

export interface ModelBatchesOptions extends ModelSimulatorOptions {
  /** A batch's production turnaround, before scaling. @defaultValue `sampleBatchTurnaroundMs` */
  turnaroundMs?: () => number;
  /** The clock, real ms since the epoch. @defaultValue `Date.now` */
  now?: () => number;
  /** Production ms a finished batch and its files are kept. @defaultValue 7 days */
  retentionMs?: number;
  /** Batches kept at most; the oldest finished go first, and a new one is refused when none has finished. @defaultValue 1000 */
  maxBatches?: number;
  /** Files kept at most; the oldest that no kept batch uses go first. @defaultValue 2000 */
  maxFiles?: number;
  /** An uploaded file's size at most, in bytes. @defaultValue 100 MB */
  maxFileBytes?: number;
}

export interface ModelBatches {
  routes: Route[];
  /** Batches held now, finished ones included. */
  batches(): number;
  /** Files held now. */
  files(): number;
}

/** One line of a batch input file, as OpenAI's Batch API takes it. */
const batchLineSchema = z.strictObject({
  custom_id: z.string().min(1).max(512),
  method: z.literal("POST"),
  url: z.literal("/v1/chat/completions"),
  body: z.record(z.string(), z.unknown()),
});

const createBatchSchema = z.object({
  input_file_id: z.string().min(1),
  endpoint: z.literal("/v1/chat/completions"),
  completion_window: z.literal("24h"),
  metadata: z.record(z.string().max(64), z.string().max(512)).nullish(),
});

interface BatchLine {
  customId: string;
  request: ChatCompletionRequest;
  /** What the line answers: its chat completion, or the refusal the sync endpoint would give it. */
  outcome: { ok: true } | { ok: false; status: number; error: ReturnType<typeof errorBody> };
}

interface StoredFile {
  object: FileObject;
  content: string;
  /** The lines of a batch input file. */
  lines?: BatchLine[];
}

type Status = Batch["status"];

interface StoredBatch {
  id: string;
  inputFileId: string;
  metadata: Record<string, string> | null;
  lines: BatchLine[];
  /** Failed requests among the first i, for i = 0…lines.length: the counts of a batch of 50,000 read at once. */
  failedBefore: number[];
  /** Real ms of each phase's start, from `createdAt`. */
  createdAt: number;
  startedAt: number;
  finalizingAt: number;
  completedAt: number;
  expiresAt: number;
  /** Why the batch failed at validation (an unknown model). */
  errors: Batch.Errors | null;
  cancelledAt?: number;
  /** Set once it ended and its output and error files exist. */
  ended?: {
    at: number;
    status: Status;
    outputFileId: string | null;
    errorFileId: string | null;
    counts: BatchRequestCounts;
  };
}

const id = (prefix: string) => `${prefix}${randomBytes(12).toString("hex")}`;
const seconds = (ms: number | undefined) => (ms === undefined ? null : Math.floor(ms / 1000));

export function createModelBatches(options: ModelBatchesOptions, faults: SimulatorFaults): ModelBatches {
  const service = new BatchService(options, faults);
  return {
    routes: service.routes().map(service.refusals.guard),
    batches: () => service.batches.size,
    files: () => service.files.size,
  };
}

/** The batch service's settings (from its options), its files and its batches, and the routes that use them. */
class BatchService {
  private readonly timeScale: number;
  private readonly random: () => number;
  private readonly errorRate: number;
  private readonly turnaroundMs: () => number;
  private readonly now: () => number;
  private readonly retentionMs: number;
  private readonly maxBatches: number;
  private readonly maxFiles: number;
  private readonly maxFileBytes: number;
  private readonly faults: SimulatorFaults;
  readonly refusals: ModelRefusals;
  readonly files = new Map<string, StoredFile>();
  readonly batches = new Map<string, StoredBatch>();

  /** Settings from `options`, their defaults otherwise; no files, no batches. */
  constructor(options: ModelBatchesOptions, faults: SimulatorFaults) {
    this.faults = faults;
    this.timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
    const random = options.random ?? Math.random;
    this.random = random;
    this.errorRate = options.errorRate ?? env().BOUNDED_SIM_MODEL_ERROR_RATE;
    this.turnaroundMs = options.turnaroundMs ?? (() => sampleBatchTurnaroundMs(random));
    this.now = options.now ?? Date.now;
    this.retentionMs = scaled(options.retentionMs ?? 7 * 24 * 3_600_000, this.timeScale);
    this.maxBatches = options.maxBatches ?? 1000;
    this.maxFiles = options.maxFiles ?? 2000;
    this.maxFileBytes = options.maxFileBytes ?? 100 * 1024 * 1024;
    this.refusals = modelRefusalsOf(options);
  }

  /** Keeps a file (an upload, or a batch's output or errors) and answers its File object. */
  private storeFile(filename: string, purpose: FileObject["purpose"], content: string, lines?: BatchLine[]) {
    const object: FileObject = {
      id: id("file-"),
      object: "file",
      bytes: Buffer.byteLength(content),
      created_at: seconds(this.now())!,
      filename,
      purpose,
      status: "processed",
    };
    this.files.set(object.id, { object, content, lines });
    return object;
  }

  /** Ends a batch: writes its output (the requests done) and error file (those that failed or were not done). */
  private end(batch: StoredBatch, status: Status, at: number, done: number): void {
    const { output, errors } = resultLines(batch, status, done);
    const write = (lines: string[], kind: string) =>
      lines.length === 0
        ? null
        : this.storeFile(`${batch.id}_${kind}.jsonl`, "batch_output", `${lines.join("\n")}\n`).id;
    const doneCounts = countsOf(batch, done);
    batch.ended = {
      at,
      status,
      outputFileId: write(output, "output"),
      errorFileId: write(errors, "error"),
      // The requests not done count as failed: every request of an ended batch is one or the other.
      counts: {
        total: batch.lines.length,
        completed: doneCounts.completed,
        failed: batch.lines.length - doneCounts.completed,
      },
    };
    log.info({ batch: batch.id, status, done, total: batch.lines.length }, `batch ${status}`);
  }

  /** The batch as OpenAI's Batch object describes it now; ends it first when its time has come. */
  private view(batch: StoredBatch): Batch {
    const t = this.now();
    const state = this.statusAt(batch, t);
    if (state === "ended") return this.view(batch);
    return batchObject(batch, t, state.status, state.counts);
  }

  /**
   * The batch's status and counts at real time `t`; "ended" when it has just been ended (its
   * cancelling over, its window expired or its requests done), to be read again.
   */
  private statusAt(batch: StoredBatch, t: number): { status: Status; counts: BatchRequestCounts } | "ended" {
    if (batch.errors)
      return { status: t < batch.startedAt ? "validating" : "failed", counts: { total: 0, completed: 0, failed: 0 } };
    if (batch.ended) return { status: batch.ended.status, counts: batch.ended.counts };
    if (batch.cancelledAt !== undefined) {
      const cancelledAt = batch.cancelledAt + scaled(CANCELLING_MS, this.timeScale);
      if (t >= cancelledAt) {
        this.end(batch, "cancelled", cancelledAt, doneBy(batch, batch.cancelledAt));
        return "ended";
      }
      return { status: "cancelling", counts: countsOf(batch, doneBy(batch, batch.cancelledAt)) };
    }
    if (batch.completedAt > batch.expiresAt && t >= batch.expiresAt) {
      this.end(batch, "expired", batch.expiresAt, doneBy(batch, batch.expiresAt));
      return "ended";
    }
    if (t >= batch.completedAt) {
      this.end(batch, "completed", batch.completedAt, batch.lines.length);
      return "ended";
    }
    const status = t < batch.startedAt ? "validating" : t < batch.finalizingAt ? "in_progress" : "finalizing";
    return { status, counts: countsOf(batch, doneBy(batch, t)) };
  }

  /** Drops what is past its retention, then the oldest finished batches (and files no batch uses) beyond the caps. */
  private prune(): void {
    const t = this.now();
    for (const batch of this.batches.values()) this.view(batch);
    const finished = [...this.batches.values()]
      .filter((b) => finishedAt(b) !== undefined && this.now() >= finishedAt(b)!)
      .sort((a, b) => finishedAt(a)! - finishedAt(b)!);
    for (const batch of finished) {
      if (t - finishedAt(batch)! < this.retentionMs && this.batches.size < this.maxBatches) break;
      this.batches.delete(batch.id);
      for (const fileId of [batch.inputFileId, batch.ended?.outputFileId, batch.ended?.errorFileId])
        if (fileId) this.files.delete(fileId);
    }
    if (this.files.size >= this.maxFiles) this.pruneFiles();
  }

  /** Drops the oldest files no kept batch uses, down to under the cap. */
  private pruneFiles(): void {
    const used = new Set(
      [...this.batches.values()].flatMap((b) => [b.inputFileId, b.ended?.outputFileId, b.ended?.errorFileId]),
    );
    for (const [fileId] of this.files) {
      if (this.files.size < this.maxFiles) break;
      if (!used.has(fileId)) this.files.delete(fileId);
    }
  }

  /** A 500 while the batch service is made to fail. */
  private requireUp(): void {
    if (this.faults.batches().failing)
      throw new HttpError(500, "The server had an error while processing your request.", "server_error");
  }

  /** The batch of that id; a 404 when there is none. */
  private batchOf(batchId: string): StoredBatch {
    const batch = this.batches.get(batchId);
    if (!batch) throw new HttpError(404, `No batch found with id '${batchId}'.`, "invalid_request_error");
    return batch;
  }

  /** The file of that id; a 404 when there is none. */
  private fileOf(fileId: string): StoredFile {
    const file = this.files.get(fileId);
    if (!file) throw new HttpError(404, `No such File object: ${fileId}`, "invalid_request_error", { param: "id" });
    return file;
  }

  /** The service's endpoints, before the API key check `refusals.guard` adds. */
  routes(): Route[] {
    return [
      { method: "POST", path: "/v1/files", handler: (ctx) => this.uploadFile(ctx) },
      {
        method: "GET",
        path: "/v1/files/:id",
        handler: ({ res, params }) => {
          this.requireUp();
          sendJson(res, 200, this.fileOf(params.id!).object);
        },
      },
      { method: "GET", path: "/v1/files/:id/content", handler: (ctx) => this.fileContent(ctx) },
      { method: "POST", path: "/v1/batches", handler: (ctx) => this.createBatch(ctx) },
      // Newest first, `limit` (1–100, default 20) at a time, from `after` (a batch id) on.
      { method: "GET", path: "/v1/batches", handler: (ctx) => this.listBatches(ctx) },
      {
        method: "GET",
        path: "/v1/batches/:id",
        handler: ({ res, params }) => {
          this.requireUp();
          sendJson(res, 200, this.view(this.batchOf(params.id!)));
        },
      },
      { method: "POST", path: "/v1/batches/:id/cancel", handler: (ctx) => this.cancelBatch(ctx) },
    ];
  }

  /** `POST /v1/files`: a batch input file (purpose `batch`), its lines checked and each one's outcome decided. */
  private async uploadFile({ req, res }: RequestContext): Promise<void> {
    this.requireUp();
    const form = await readForm(req, this.maxFileBytes);
    const purpose = form.get("purpose");
    const file = form.get("file");
    if (purpose !== "batch")
      throw new HttpError(
        400,
        `purpose must be 'batch': the simulator keeps batch input files only (got '${String(purpose)}')`,
        "invalid_request_error",
        { param: "purpose" },
      );
    if (!file || typeof file === "string")
      throw new HttpError(400, "the form must carry the file in its 'file' field", "invalid_request_error", {
        param: "file",
      });
    const content = await file.text();
    const lines = parseBatchFile(content, (request) => this.refusalOf(request));
    this.prune();
    sendJson(res, 200, this.storeFile(file.name || "batch.jsonl", "batch", content, lines));
  }

  /** `GET /v1/files/:id/content`: the file as it was uploaded or written. */
  private fileContent({ res, params }: RequestContext): void {
    this.requireUp();
    const { content } = this.fileOf(params.id!);
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": Buffer.byteLength(content),
    });
    res.end(content);
  }

  /** `POST /v1/batches`: a batch of an input file's requests, its turnaround drawn (or as the faults say). */
  private async createBatch({ req, res }: RequestContext): Promise<void> {
    this.requireUp();
    const parsed = createBatchSchema.safeParse(await readJson(req));
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new HttpError(
        400,
        `invalid batch: ${issue?.path.join(".") || "body"}: ${issue?.message ?? "bad body"}`,
        "invalid_request_error",
        { param: issue?.path.join(".") || null },
      );
    }
    const input = this.fileOf(parsed.data.input_file_id);
    if (!input.lines)
      throw new HttpError(
        400,
        `file ${input.object.id} is not a batch input file (purpose '${input.object.purpose}')`,
        "invalid_request_error",
        { param: "input_file_id" },
      );
    this.prune();
    if (this.batches.size >= this.maxBatches)
      throw new HttpError(
        429,
        `Too many batches in progress: at most ${this.maxBatches} are kept; try again once some have finished.`,
        "rate_limit_error",
        { code: "rate_limit_exceeded" },
      );
    const { batch, production } = this.newBatch(input.object.id, input.lines, parsed.data.metadata ?? null);
    this.batches.set(batch.id, batch);
    log.info({ batch: batch.id, requests: batch.lines.length, turnaroundMs: Math.round(production) }, "batch created");
    sendJson(res, 200, this.view(batch));
  }

  /** A new batch's state, its phases timed from now, and its production turnaround. */
  private newBatch(
    inputFileId: string,
    lines: BatchLine[],
    metadata: Record<string, string> | null,
  ): { batch: StoredBatch; production: number } {
    const { timeScale } = this;
    const fault = this.faults.batches();
    const production = fault.expire ? expiringTurnaroundMs(this.random) : (fault.turnaroundMs ?? this.turnaroundMs());
    const createdAt = this.now();
    const total = scaled(production, timeScale);
    const phase = Math.min(scaled(PHASE_MAX_MS, timeScale), Math.round(total * 0.05));
    const batch: StoredBatch = {
      id: id("batch_"),
      inputFileId,
      metadata,
      lines,
      failedBefore: runningFailures(lines),
      createdAt,
      startedAt: createdAt + phase,
      finalizingAt: createdAt + total - phase,
      completedAt: createdAt + total,
      expiresAt: createdAt + scaled(BATCH_TURNAROUND.windowMs, timeScale),
      errors: unknownModelErrors(lines, this.refusals.models),
    };
    return { batch, production };
  }

  /** `GET /v1/batches`: a page of batches, newest first, `limit` (1–100, default 20) from `after` on. */
  private listBatches({ res, url }: RequestContext): void {
    this.requireUp();
    const limit = Number(url.searchParams.get("limit") ?? 20);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw new HttpError(400, "limit must be a whole number from 1 to 100", "invalid_request_error", {
        param: "limit",
      });
    const newestFirst = [...this.batches.values()].reverse();
    const after = url.searchParams.get("after");
    const from = after ? newestFirst.findIndex((b) => b.id === after) + 1 : 0;
    const page = newestFirst.slice(from, from + limit).map((batch) => this.view(batch));
    sendJson(res, 200, {
      object: "list",
      data: page,
      first_id: page[0]?.id ?? null,
      last_id: page.at(-1)?.id ?? null,
      has_more: from + limit < newestFirst.length,
    });
  }

  /** `POST /v1/batches/:id/cancel`: the batch goes `cancelling`; one already cancelling or cancelled is answered as it is, one ended otherwise is a 409. */
  private cancelBatch({ res, params }: RequestContext): void {
    this.requireUp();
    if (this.faults.batches().failingCancel)
      throw new HttpError(500, "The server had an error while processing your request.", "server_error");
    const batch = this.batchOf(params.id!);
    const before = this.view(batch);
    if (before.status === "cancelling" || before.status === "cancelled") {
      sendJson(res, 200, before);
      return;
    }
    if (batch.ended || batch.errors)
      throw new HttpError(409, `Cannot cancel a batch with status '${before.status}'.`, "invalid_request_error");
    batch.cancelledAt = this.now();
    sendJson(res, 200, this.view(batch));
  }

  /** What the sync endpoint would refuse a request with (its size), decided when it is uploaded; or a 500 at the error rate. */
  private refusalOf(request: ChatCompletionRequest): BatchLine["outcome"] {
    try {
      this.refusals.requireFits({
        prompt: countPromptTokens(request.messages, request.tools),
        completion: completionLimitSchema.parse(request),
      });
    } catch (err) {
      if (err instanceof HttpError)
        return { ok: false, status: err.status, error: errorBody(err.message, err.type, err.detail) };
      throw err;
    }
    if (this.random() < this.errorRate)
      return {
        ok: false,
        status: 500,
        error: errorBody("The server had an error while processing your request.", "server_error"),
      };
    return { ok: true };
  }
}

/** Requests done by real time `at`: spread evenly over the in-progress phase, in file order. */
function doneBy(batch: StoredBatch, at: number): number {
  const span = batch.finalizingAt - batch.startedAt;
  if (at >= batch.finalizingAt || span <= 0) return batch.lines.length;
  if (at < batch.startedAt) return 0;
  return Math.floor((batch.lines.length * (at - batch.startedAt)) / span);
}

/** The counts once the first `done` requests are done, from the batch's running count of failures. */
function countsOf(batch: StoredBatch, done: number): BatchRequestCounts {
  const failed = batch.failedBefore[done]!;
  return { total: batch.lines.length, completed: done - failed, failed };
}

/** When a batch finished (ended, or failed at validation); undefined while it runs. */
function finishedAt(batch: StoredBatch): number | undefined {
  return batch.ended?.at ?? (batch.errors ? batch.startedAt : undefined);
}

/** An ended batch's output lines (the requests done that succeeded) and error lines (those that failed or were not done). */
function resultLines(batch: StoredBatch, status: Status, done: number): { output: string[]; errors: string[] } {
  const output: string[] = [];
  const errors: string[] = [];
  batch.lines.forEach((line, i) => {
    const requestId = `req_${randomBytes(16).toString("hex")}`;
    const base = { id: id("batch_req_"), custom_id: line.customId };
    if (i >= done) {
      const error =
        status === "expired"
          ? {
              code: "batch_expired",
              message: "This request could not be executed before the completion window expired.",
            }
          : { code: "batch_cancelled", message: "This request was not executed because the batch was cancelled." };
      errors.push(JSON.stringify({ ...base, response: null, error }));
    } else if (line.outcome.ok) {
      const body = completion(line.request, simulateAnswer(line.request));
      output.push(
        JSON.stringify({ ...base, response: { status_code: 200, request_id: requestId, body }, error: null }),
      );
    } else {
      const response = { status_code: line.outcome.status, request_id: requestId, body: line.outcome.error };
      errors.push(JSON.stringify({ ...base, response, error: null }));
    }
  });
  return { output, errors };
}

/** The Batch object of a batch with this status and these counts, read at real time `t`. */
function batchObject(batch: StoredBatch, t: number, status: Status, counts: BatchRequestCounts): Batch {
  const times: Partial<Record<`${Status}_at`, number>> = {};
  if (batch.errors && status === "failed") times.failed_at = batch.startedAt;
  if (!batch.errors && t >= batch.startedAt) times.in_progress_at = batch.startedAt;
  if (batch.ended?.status === "completed" || status === "finalizing") times.finalizing_at = batch.finalizingAt;
  if (batch.cancelledAt !== undefined) times.cancelling_at = batch.cancelledAt;
  if (batch.ended) times[`${batch.ended.status}_at`] = batch.ended.at;
  return {
    id: batch.id,
    object: "batch",
    endpoint: "/v1/chat/completions",
    errors: batch.errors,
    input_file_id: batch.inputFileId,
    completion_window: "24h",
    status,
    output_file_id: batch.ended?.outputFileId ?? null,
    error_file_id: batch.ended?.errorFileId ?? null,
    created_at: seconds(batch.createdAt)!,
    in_progress_at: seconds(times.in_progress_at),
    expires_at: seconds(batch.expiresAt),
    finalizing_at: seconds(times.finalizing_at),
    completed_at: seconds(times.completed_at),
    failed_at: seconds(times.failed_at),
    expired_at: seconds(times.expired_at),
    cancelling_at: seconds(times.cancelling_at),
    cancelled_at: seconds(times.cancelled_at),
    request_counts: counts,
    metadata: batch.metadata,
  } as Batch;
}

/** A batch's validation errors: the first line whose model the service does not have, or null. */
function unknownModelErrors(lines: BatchLine[], models: readonly string[]): Batch.Errors | null {
  const unknownModel = lines.findIndex((l) => !models.includes(l.request.model));
  if (unknownModel < 0) return null;
  return {
    object: "list",
    data: [
      {
        code: "model_not_found",
        message: `The model \`${lines[unknownModel]!.request.model}\` does not exist or you do not have access to it.`,
        line: unknownModel + 1,
        param: "body.model",
      },
    ],
  };
}

/**
 * A batch input file's lines, each `{custom_id, method: "POST", url: "/v1/chat/completions", body}`
 * with a chat-completion request as its body (not streamed) and a custom id of its own; a line
 * that is not is a 400 naming it, so a bad file is refused at upload with nothing kept.
 */
export function parseBatchFile(
  content: string,
  outcomeOf: (request: ChatCompletionRequest) => BatchLine["outcome"],
): BatchLine[] {
  const lines: BatchLine[] = [];
  const seen = new Set<string>();
  const refuse: (line: number, message: string) => never = (line, message) => {
    throw new HttpError(400, `line ${line}: ${message}`, "invalid_request_error", {
      param: "file",
      code: "invalid_batch_file",
    });
  };
  if (content.trim() === "") refuse(1, "the file has no requests");
  const texts = content.replace(/\r?\n$/, "").split(/\r?\n/);
  if (texts.length > MAX_BATCH_REQUESTS)
    refuse(MAX_BATCH_REQUESTS + 1, `a batch takes at most ${MAX_BATCH_REQUESTS} requests`);
  for (const [i, text] of texts.entries()) {
    const n = i + 1;
    if (Buffer.byteLength(text) > MAX_LINE_BYTES) refuse(n, `over ${MAX_LINE_BYTES} bytes`);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      refuse(n, "not a JSON object");
    }
    const line = batchLineSchema.safeParse(value);
    if (!line.success) {
      const issue = line.error.issues[0];
      refuse(n, `${issue?.path.join(".") || "line"}: ${issue?.message ?? "invalid"}`);
    }
    const request = chatCompletionRequestSchema.safeParse(line.data.body);
    if (!request.success) {
      const issue = request.error.issues[0];
      refuse(n, `body.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`);
    }
    if (request.data.stream) refuse(n, "body.stream: a batch request is not streamed");
    if (seen.has(line.data.custom_id)) refuse(n, `custom_id '${line.data.custom_id}' is not unique in the file`);
    seen.add(line.data.custom_id);
    lines.push({ customId: line.data.custom_id, request: request.data, outcome: outcomeOf(request.data) });
  }
  return lines;
}

function runningFailures(lines: BatchLine[]): number[] {
  const sums = [0];
  for (const line of lines) sums.push(sums.at(-1)! + (line.outcome.ok ? 0 : 1));
  return sums;
}

/** A multipart form body, read up to `limitBytes` (413 beyond) and parsed as the platform's `Request` parses one. */
async function readForm(req: IncomingMessage, limitBytes: number): Promise<FormData> {
  const type = req.headers["content-type"] ?? "";
  if (!type.startsWith("multipart/form-data"))
    throw new HttpError(400, "the file must be sent as multipart/form-data (fields 'purpose' and 'file')");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw new HttpError(413, `file over ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return await new Response(Buffer.concat(chunks), { headers: { "content-type": type } }).formData();
  } catch {
    throw new HttpError(400, "the body is not a valid multipart/form-data form");
  }
}
