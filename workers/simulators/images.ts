import { randomUUID } from "node:crypto";
import { deflateSync } from "node:zlib";
import { z } from "zod";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { scaled } from "@/lib/time";
import { HttpError, readJson, sendJson, type RequestContext, type Route } from "./router";
import {
  createCallerWait,
  sampleLatencyMs,
  type CallerWait,
  type LatencyShape,
  type SimulatorOptions,
} from "./simulated-call";

const log = logger("simulators.images");

/**
 * The paid image provider, in production time: a render takes ~40 s (lognormal, σ 0.5, so p99
 * ~2 min) with a rare tail up to 4 min — past one poll attempt of 150 s, which is what the
 * second attempt is for. Status polls answer in ~0.2 s but now and then hang for 3 min (a lost
 * request); downloads take ~2 s with a rare 90 s stall; the QA check ~8 s with a rare 60 s one.
 */
export const IMAGE_LATENCY = {
  renderMedianMs: 40_000,
  renderSigma: 0.5,
  renderTailShare: 0.01,
  renderTailMaxMs: 240_000,
  pollMs: 200,
  pollHangShare: 0.005,
  pollHangMs: 180_000,
  downloadMs: 2_000,
  downloadStallShare: 0.01,
  downloadStallMs: 90_000,
  qaMedianMs: 8_000,
  qaSlowShare: 0.01,
  qaSlowMs: 60_000,
} as const;

/** A render's duration as a latency shape: its rare tail runs from the median up to the cap. */
const RENDER_LATENCY: LatencyShape = {
  medianMs: IMAGE_LATENCY.renderMedianMs,
  sigma: IMAGE_LATENCY.renderSigma,
  tailShare: IMAGE_LATENCY.renderTailShare,
  tailFromMs: IMAGE_LATENCY.renderMedianMs,
  maxMs: IMAGE_LATENCY.renderTailMaxMs,
};

/** One render's production duration in ms (not yet time-scaled). Pure given `random`. */
export function sampleRenderMs(random: () => number = Math.random): number {
  return sampleLatencyMs(RENDER_LATENCY, random);
}

export interface ImageSimulatorOptions extends SimulatorOptions {
  /** Share of QA checks that answer "defect". @defaultValue 0.15 */
  defectRate?: number;
  /** Share of renders the provider gives up on (status "failed"). @defaultValue 0.01 */
  failRate?: number;
  /** Production milliseconds of one render. @defaultValue lognormal around `IMAGE_LATENCY.renderMedianMs` */
  renderMs?: () => number;
  /** Production milliseconds of answering one status poll. */
  pollMs?: () => number;
  /** Production milliseconds of one download. */
  downloadMs?: () => number;
  /** Production milliseconds of one QA check. */
  qaMs?: () => number;
}

export interface ImageSimulator {
  routes: Route[];
  /** Renders the provider has been paid for (every submit, whether or not anyone downloads it). */
  submitted(): number;
}

const submitSchema = z
  .object({ prompt: z.string().min(1).max(2_000), reference: z.string().max(200).optional() })
  .strict();

interface Render {
  id: string;
  readyAt: number;
  failed: boolean;
  image?: Buffer;
}

/** A tiny valid PNG (solid colour), different per render, so a delivered card is a real image. */
export function cardPng(seed: string, size = 16): Buffer {
  let h = 0;
  for (const c of seed) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  const [r, g, b] = [h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff];
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer) => {
    let c = 0xffffffff;
    for (const byte of buf) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolour
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: size }, () => [r, g, b]).flat())]);
  const raw = Buffer.concat(Array.from({ length: size }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/**
 * The image provider: `POST /images/generations` `{ prompt }` → 202 `{ id, status }` (paid from
 * here on); `GET /images/generations/:id` → `{ id, status: "running" | "succeeded" | "failed" }`;
 * `GET /images/generations/:id/image` → the PNG; `POST /images/generations/:id/qa` →
 * `{ verdict: "ok" | "defect" }`. There is no cancel: `DELETE` is answered 405.
 */
export function createImageSimulator(options: ImageSimulatorOptions = {}): ImageSimulator {
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const L = IMAGE_LATENCY;
  const provider: ImageProvider = {
    timeScale,
    random,
    defectRate: options.defectRate ?? 0.15,
    failRate: options.failRate ?? 0.01,
    renderMs: options.renderMs ?? (() => sampleRenderMs(random)),
    pollMs: options.pollMs ?? (() => (random() < L.pollHangShare ? L.pollHangMs : L.pollMs)),
    downloadMs:
      options.downloadMs ??
      (() => (random() < L.downloadStallShare ? L.downloadStallMs : L.downloadMs * (0.5 + random()))),
    qaMs: options.qaMs ?? (() => (random() < L.qaSlowShare ? L.qaSlowMs : L.qaMedianMs * (0.5 + random()))),
    renders: new Map<string, Render>(),
    paid: 0,
    slowdown: options.slowdown ?? (() => 1),
    caller: createCallerWait(timeScale, log, options.slowdown),
  };
  const routes: Route[] = [
    { method: "POST", path: "/images/generations", handler: (ctx) => submit(provider, ctx) },
    { method: "GET", path: "/images/generations/:id", handler: (ctx) => poll(provider, ctx) },
    {
      method: "DELETE",
      path: "/images/generations/:id",
      handler: () => {
        throw new HttpError(405, "generations cannot be cancelled", "method_not_allowed");
      },
    },
    { method: "GET", path: "/images/generations/:id/image", handler: (ctx) => download(provider, ctx) },
    { method: "POST", path: "/images/generations/:id/qa", handler: (ctx) => checkQuality(provider, ctx) },
  ];
  return { routes, submitted: () => provider.paid };
}

/** What the image provider's routes share: its settings, the renders submitted and how many were paid for. */
interface ImageProvider {
  timeScale: number;
  random: () => number;
  defectRate: number;
  failRate: number;
  renderMs: () => number;
  /** How many times its drawn time a render takes now. */
  slowdown: () => number;
  pollMs: () => number;
  downloadMs: () => number;
  qaMs: () => number;
  renders: Map<string, Render>;
  paid: number;
  caller: CallerWait;
}

/** A render submitted; a 404 for an id never given out. */
function find(provider: ImageProvider, id: string): Render {
  const render = provider.renders.get(id);
  if (!render) throw new HttpError(404, `no generation ${id}`, "not_found");
  return render;
}

/** A render that has succeeded: its image and its QA check exist only then. */
function findSucceeded(provider: ImageProvider, id: string): Render {
  const render = find(provider, id);
  if (Date.now() < render.readyAt || render.failed) throw new HttpError(409, "the image is not ready", "not_ready");
  return render;
}

/** `POST /images/generations`: a render is paid for and started, answered 202 at once. */
async function submit(provider: ImageProvider, ctx: RequestContext): Promise<void> {
  const parsed = submitSchema.safeParse(await readJson(ctx.req));
  if (!parsed.success) throw new HttpError(400, `invalid request: ${parsed.error.issues[0]?.message ?? "bad body"}`);
  const id = `img_${randomUUID()}`;
  provider.paid++;
  provider.renders.set(id, {
    id,
    readyAt: Date.now() + scaled(provider.renderMs() * provider.slowdown(), provider.timeScale),
    failed: provider.random() < provider.failRate,
  });
  sendJson(ctx.res, 202, { id, status: "running" });
}

/** `GET /images/generations/:id`: the render's status, after a poll's latency. */
async function poll(provider: ImageProvider, ctx: RequestContext): Promise<void> {
  const render = find(provider, ctx.params.id!);
  if (!(await provider.caller.wait(ctx, provider.pollMs))) return;
  const status = Date.now() < render.readyAt ? "running" : render.failed ? "failed" : "succeeded";
  sendJson(ctx.res, 200, {
    id: render.id,
    status,
    ...(status === "failed" ? { error: "the render failed on the provider's side" } : {}),
  });
}

/** `GET /images/generations/:id/image`: the PNG of a render that succeeded, after a download's latency. */
async function download(provider: ImageProvider, ctx: RequestContext): Promise<void> {
  const render = findSucceeded(provider, ctx.params.id!);
  if (!(await provider.caller.wait(ctx, provider.downloadMs))) return;
  render.image ??= cardPng(render.id);
  ctx.res.writeHead(200, { "content-type": "image/png", "content-length": render.image.length });
  ctx.res.end(render.image);
}

/** `POST /images/generations/:id/qa`: the QA verdict on a render that succeeded, after the check's latency. */
async function checkQuality(provider: ImageProvider, ctx: RequestContext): Promise<void> {
  const render = findSucceeded(provider, ctx.params.id!);
  if (!(await provider.caller.wait(ctx, provider.qaMs))) return;
  sendJson(ctx.res, 200, { id: render.id, verdict: provider.random() < provider.defectRate ? "defect" : "ok" });
}
