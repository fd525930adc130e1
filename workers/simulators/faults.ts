import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { SILENCEABLE_SIMULATORS } from "@/lib/env";
import { logger } from "@/lib/log";
import { HttpError, readJson, sendJson, type Route } from "./router";

const log = logger("simulators.faults");

/**
 * The failures of an outside service that are not an answer: the simulators can stop answering
 * a service's calls without refusing them — connections accepted, requests read, nothing sent
 * back — which is what a frozen or degraded provider looks like from the caller's side (no
 * error, no status, only time passing).
 *
 * Switched per service, from a shell or another process (`POST /_control/<service>` with
 * `{"silent": true}`), in process (`faults.setSilent`), or from the start (`BOUNDED_SIM_SILENT`).
 * A call that arrived while its service was silent is never answered, also not once the silence
 * ends: the provider lost it, and only its caller's own timeout (or closing the connection) ends
 * it. Calls that arrive after the silence ends are answered as usual.
 */

/** The services that can be silenced, and the path prefix each one's calls arrive under. */
export type SilenceableService = (typeof SILENCEABLE_SIMULATORS)[number];
export const SILENCEABLE_SERVICES: Record<SilenceableService, string> = {
  model: "/v1",
  "backup-model": "/backup/v1",
  ocr: "/ocr",
  images: "/images",
  marketplace: "/marketplace",
};
const silenceableServiceSchema = z.enum(SILENCEABLE_SIMULATORS);

/** What `GET`/`POST /_control/<service>` answer. */
export interface ServiceFaultState {
  service: SilenceableService;
  silent: boolean;
  /** How many times its usual latency each call of the service takes now; 1: as usual. */
  slowdown: number;
  /** Calls of this service received while it was silent whose callers are still waiting. */
  held: number;
}

/**
 * What the model simulator's batch service is made to do (./model-batches.ts), for tests and
 * benches: `GET`/`POST /_control/model/batches` (a POST changes the fields it names).
 */
export interface BatchFaultState {
  /** Every batch created from now on expires at its 24 h window, with part of its requests done. */
  expire: boolean;
  /** Production ms every batch created from now on takes, instead of a draw; null: drawn. */
  turnaroundMs: number | null;
  /** Every call of the batch service (`/v1/files`, `/v1/batches`) answers 500, as an outage of it does. */
  failing: boolean;
  /** Only a batch's cancel answers 500: the service shows the batch but will not stop it. */
  failingCancel: boolean;
}

const batchFaultsBodySchema = z
  .strictObject({
    expire: z.boolean(),
    turnaroundMs: z
      .number()
      .int()
      .min(0)
      .max(30 * 24 * 3_600_000)
      .nullable(),
    failing: z.boolean(),
    failingCancel: z.boolean(),
  })
  .partial();

export interface SimulatorFaults {
  setSilent(service: SilenceableService, silent: boolean): ServiceFaultState;
  /** Makes every call of the service that starts from now on take `factor` times its latency (1: as usual). */
  setSlowdown(service: SilenceableService, factor: number): ServiceFaultState;
  /** The service's slowdown now: what its simulator multiplies each call's latency by. */
  slowdown(service: SilenceableService): number;
  /** The batch service's faults now. */
  batches(): BatchFaultState;
  /** Changes the fields given of the batch service's faults; the state after. */
  setBatches(change: Partial<BatchFaultState>): BatchFaultState;
  state(service: SilenceableService): ServiceFaultState;
  /**
   * Takes a request of a silent service and keeps it unanswered (true: the caller of `hold` must
   * send nothing); false for a request it is not to hold.
   */
  hold(req: IncomingMessage, res: ServerResponse): boolean;
  /** `GET` and `POST /_control/:service`, and `/_control/model/batches`. */
  routes: Route[];
}

/** The most a service can be slowed: a 5.5 s model call then takes 55 minutes. */
export const MAX_SLOWDOWN = 600;

const controlBodySchema = z
  .strictObject({ silent: z.boolean(), slowdown: z.number().min(1).max(MAX_SLOWDOWN) })
  .partial()
  .refine((body) => body.silent !== undefined || body.slowdown !== undefined);

function serviceOf(pathname: string): SilenceableService | undefined {
  for (const [service, prefix] of Object.entries(SILENCEABLE_SERVICES) as [SilenceableService, string][]) {
    if (pathname === prefix || pathname.startsWith(`${prefix}/`)) return service;
  }
  return undefined;
}

export function createSimulatorFaults(initiallySilent: readonly SilenceableService[] = []): SimulatorFaults {
  const faults: FaultsState = {
    silent: new Set<SilenceableService>(initiallySilent),
    held: new Map<SilenceableService, Set<ServerResponse>>(),
    slowdown: new Map<SilenceableService, number>(),
    batchFaults: { expire: false, turnaroundMs: null, failing: false, failingCancel: false },
  };
  return {
    setSilent: (service, on) => setSilent(faults, service, on),
    setSlowdown: (service, factor) => setSlowdown(faults, service, factor),
    slowdown: (service) => faults.slowdown.get(service) ?? 1,
    state: (service) => serviceState(faults, service),
    batches: () => ({ ...faults.batchFaults }),
    setBatches: (change) => setBatches(faults, change),
    routes: controlRoutes(faults),
    hold: (req, res) => hold(faults, req, res),
  };
}

/** What `createSimulatorFaults` keeps: the silent services, the calls each holds, the batch service's faults. */
interface FaultsState {
  silent: Set<SilenceableService>;
  held: Map<SilenceableService, Set<ServerResponse>>;
  slowdown: Map<SilenceableService, number>;
  batchFaults: BatchFaultState;
}

/** The calls a service holds unanswered, an empty set the first time. */
function heldOf(faults: FaultsState, service: SilenceableService): Set<ServerResponse> {
  return faults.held.get(service) ?? faults.held.set(service, new Set()).get(service)!;
}

/** `SimulatorFaults.state`: whether the service is silent, and how many of its calls it holds. */
function serviceState(faults: FaultsState, service: SilenceableService): ServiceFaultState {
  return {
    service,
    silent: faults.silent.has(service),
    slowdown: faults.slowdown.get(service) ?? 1,
    held: heldOf(faults, service).size,
  };
}

/** `SimulatorFaults.setSilent`: silences the service or lets it answer again, logged when it changes. */
function setSilent(faults: FaultsState, service: SilenceableService, on: boolean): ServiceFaultState {
  if (on !== faults.silent.has(service))
    log.warn(
      { service, silent: on },
      on ? `${service} simulator stops answering` : `${service} simulator answers again`,
    );
  if (on) faults.silent.add(service);
  else faults.silent.delete(service);
  return serviceState(faults, service);
}

/** `SimulatorFaults.setSlowdown`: the factor every call of the service starting from now waits out, logged when it changes. */
function setSlowdown(faults: FaultsState, service: SilenceableService, factor: number): ServiceFaultState {
  if (factor !== (faults.slowdown.get(service) ?? 1))
    log.warn(
      { service, slowdown: factor },
      factor === 1
        ? `${service} simulator answers at its usual pace`
        : `${service} simulator answers ${factor}× slower`,
    );
  if (factor === 1) faults.slowdown.delete(service);
  else faults.slowdown.set(service, factor);
  return serviceState(faults, service);
}

/** `SimulatorFaults.setBatches`: changes the fields given, logged; a copy of the faults after. */
function setBatches(faults: FaultsState, change: Partial<BatchFaultState>): BatchFaultState {
  Object.assign(faults.batchFaults, change);
  log.warn({ batches: faults.batchFaults }, "batch service faults changed");
  return { ...faults.batchFaults };
}

/** The service a `:service` segment names; a 404 naming the others when it names none. */
function parseService(name: string | undefined): SilenceableService {
  const parsed = silenceableServiceSchema.safeParse(name);
  if (!parsed.success)
    throw new HttpError(
      404,
      `no such simulated service '${name}': one of ${Object.keys(SILENCEABLE_SERVICES).join(", ")}`,
    );
  return parsed.data;
}

/** `GET` and `POST /_control/:service`, and `/_control/model/batches`. */
function controlRoutes(faults: FaultsState): Route[] {
  return [
    {
      method: "GET",
      path: "/_control/:service",
      handler: ({ res, params }) => sendJson(res, 200, serviceState(faults, parseService(params.service))),
    },
    {
      method: "POST",
      path: "/_control/:service",
      handler: async ({ req, res, params }) => {
        const service = parseService(params.service);
        const body = controlBodySchema.safeParse(await readJson(req));
        if (!body.success)
          throw new HttpError(
            400,
            `the body names either or both of {"silent": true or false, "slowdown": a number from 1 (as usual) to ${MAX_SLOWDOWN}}`,
          );
        const { silent, slowdown } = body.data;
        if (silent !== undefined) setSilent(faults, service, silent);
        if (slowdown !== undefined) setSlowdown(faults, service, slowdown);
        sendJson(res, 200, serviceState(faults, service));
      },
    },
    {
      method: "GET",
      path: "/_control/model/batches",
      handler: ({ res }) => sendJson(res, 200, { ...faults.batchFaults }),
    },
    {
      method: "POST",
      path: "/_control/model/batches",
      handler: async ({ req, res }) => {
        const body = batchFaultsBodySchema.safeParse(await readJson(req));
        if (!body.success)
          throw new HttpError(
            400,
            'the body names any of {"expire": boolean, "turnaroundMs": production ms or null, "failing": boolean, "failingCancel": boolean}',
          );
        sendJson(res, 200, setBatches(faults, body.data));
      },
    },
  ];
}

/** `SimulatorFaults.hold`: keeps a call of a silent service unanswered until its caller leaves. */
function hold(faults: FaultsState, req: IncomingMessage, res: ServerResponse): boolean {
  const service = serviceOf(new URL(req.url ?? "/", "http://simulator.local").pathname);
  if (!service || !faults.silent.has(service)) return false;
  const calls = heldOf(faults, service);
  calls.add(res);
  res.on("close", () => calls.delete(res));
  // Read the body as a server that received it would, so the caller's upload completes and
  // it waits for an answer, the way a call to a frozen provider waits.
  req.resume();
  return true;
}
