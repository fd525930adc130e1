import http from "node:http";
import type { AddressInfo } from "node:net";
import { env, SIMULATOR_PATHS } from "@/lib/env";
import { createSimulatorFaults, type SilenceableService, type SimulatorFaults } from "./faults";
import { createMarketplaceSimulator, type MarketplaceSimulator, type MarketplaceSimulatorOptions } from "./marketplace";
import { createImageSimulator, type ImageSimulator, type ImageSimulatorOptions } from "./images";
import { createModelSimulator, type ModelSimulator, type ModelSimulatorOptions } from "./model";
import { createModelBatches, type ModelBatches, type ModelBatchesOptions } from "./model-batches";
import { createOcrSimulator, type OcrSimulator, type OcrSimulatorOptions } from "./ocr";
import { createWebhookReceiver, type WebhookReceiver, type WebhookReceiverOptions } from "./webhook-receiver";
import { createRouter, sendJson, type Route } from "./router";

export interface SimulatorsOptions {
  /** @defaultValue 0 (any free port) */
  port?: number;
  /** Loopback only: the simulators are for this machine's workers. @defaultValue "127.0.0.1" */
  host?: string;
  model?: ModelSimulatorOptions;
  /** The second model provider, at `/backup/v1`. */
  backupModel?: Omit<ModelSimulatorOptions, "provider">;
  /** The model's batch service; what it leaves out is taken from `model`. */
  modelBatches?: Omit<ModelBatchesOptions, keyof ModelSimulatorOptions>;
  ocr?: OcrSimulatorOptions;
  images?: ImageSimulatorOptions;
  marketplace?: MarketplaceSimulatorOptions;
  webhookReceiver?: WebhookReceiverOptions;
  /** Services that answer nothing from the start (see ./faults.ts). @defaultValue `env().BOUNDED_SIM_SILENT` */
  silent?: readonly SilenceableService[];
}

export interface RunningSimulators {
  /** Base URL, e.g. `http://127.0.0.1:4010`. */
  url: string;
  /** The model endpoint's base URL, `/v1` included (`http://127.0.0.1:4010/v1`): what MODEL_BASE_URL points at. */
  modelBaseUrl: string;
  server: http.Server;
  model: ModelSimulator;
  /** The second model provider's base URL, `/backup/v1` included: another OpenAI-compatible endpoint. */
  backupModelBaseUrl: string;
  backupModel: ModelSimulator;
  /** The model's batch service (`/v1/files`, `/v1/batches`; its faults at `/_control/model/batches`). */
  modelBatches: ModelBatches;
  ocr: OcrSimulator;
  images: ImageSimulator;
  marketplace: MarketplaceSimulator;
  webhookReceiver: WebhookReceiver;
  /** Silences or slows a service's calls and says how many are held (also `GET`/`POST /_control/<service>`). */
  faults: SimulatorFaults;
  /** Stops accepting, drops in-flight calls (their callers see a network error), resolves when closed. */
  close(): Promise<void>;
}

/** Starts every simulator of the outside services on one HTTP server. */
export async function startSimulators(options: SimulatorsOptions = {}): Promise<RunningSimulators> {
  const faults = createSimulatorFaults(options.silent ?? env().BOUNDED_SIM_SILENT);
  const slowdownOf = (service: SilenceableService) => () => faults.slowdown(service);
  const model = createModelSimulator({ slowdown: slowdownOf("model"), ...options.model });
  const backupModel = createModelSimulator({
    slowdown: slowdownOf("backup-model"),
    ...options.backupModel,
    provider: "backup-model",
  });
  const modelBatches = createModelBatches({ ...options.model, ...options.modelBatches }, faults);
  const ocr = createOcrSimulator({ slowdown: slowdownOf("ocr"), ...options.ocr });
  const images = createImageSimulator({ slowdown: slowdownOf("images"), ...options.images });
  const marketplace = createMarketplaceSimulator({ slowdown: slowdownOf("marketplace"), ...options.marketplace });
  const webhookReceiver = createWebhookReceiver(options.webhookReceiver);
  const routes: Route[] = [
    { method: "GET", path: "/healthz", handler: ({ res }) => sendJson(res, 200, { ok: true }) },
    ...model.routes,
    ...backupModel.routes,
    ...modelBatches.routes,
    ...ocr.routes,
    ...images.routes,
    ...marketplace.routes,
    ...webhookReceiver.routes,
    ...faults.routes,
  ];
  const router = createRouter(routes);
  // A silent service's calls are held before any route sees them: nothing is answered, not even a 404.
  const server = http.createServer((req, res) => {
    if (!faults.hold(req, res)) router(req, res);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;

  const url = `http://${address}:${port}`;
  return {
    url,
    modelBaseUrl: `${url}${SIMULATOR_PATHS.MODEL_BASE_URL}`,
    backupModelBaseUrl: `${url}${SIMULATOR_PATHS.BACKUP_MODEL_BASE_URL}`,
    server,
    model,
    backupModel,
    modelBatches,
    ocr,
    images,
    marketplace,
    webhookReceiver,
    faults,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
