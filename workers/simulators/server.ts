import http from "node:http";
import type { AddressInfo } from "node:net";
import { SIMULATOR_PATHS } from "@/lib/env";
import { createMarketplaceSimulator, type MarketplaceSimulator, type MarketplaceSimulatorOptions } from "./marketplace";
import { createImageSimulator, type ImageSimulator, type ImageSimulatorOptions } from "./images";
import { createModelSimulator, type ModelSimulator, type ModelSimulatorOptions } from "./model";
import { createOcrSimulator, type OcrSimulator, type OcrSimulatorOptions } from "./ocr";
import { createWebhookReceiver, type WebhookReceiver, type WebhookReceiverOptions } from "./webhook-receiver";
import { createRouter, sendJson, type Route } from "./router";

export interface SimulatorsOptions {
  /** @defaultValue 0 (any free port) */
  port?: number;
  /** Loopback only: the simulators are for this machine's workers. @defaultValue "127.0.0.1" */
  host?: string;
  model?: ModelSimulatorOptions;
  ocr?: OcrSimulatorOptions;
  images?: ImageSimulatorOptions;
  marketplace?: MarketplaceSimulatorOptions;
  webhookReceiver?: WebhookReceiverOptions;
}

export interface RunningSimulators {
  /** Base URL, e.g. `http://127.0.0.1:4010`. */
  url: string;
  /** The model endpoint's base URL, `/v1` included (`http://127.0.0.1:4010/v1`): what MODEL_BASE_URL points at. */
  modelBaseUrl: string;
  server: http.Server;
  model: ModelSimulator;
  ocr: OcrSimulator;
  images: ImageSimulator;
  marketplace: MarketplaceSimulator;
  webhookReceiver: WebhookReceiver;
  /** Stops accepting, drops in-flight calls (their callers see a network error), resolves when closed. */
  close(): Promise<void>;
}

/** Starts every simulator of the outside services on one HTTP server. */
export async function startSimulators(options: SimulatorsOptions = {}): Promise<RunningSimulators> {
  const model = createModelSimulator(options.model);
  const ocr = createOcrSimulator(options.ocr);
  const images = createImageSimulator(options.images);
  const marketplace = createMarketplaceSimulator(options.marketplace);
  const webhookReceiver = createWebhookReceiver(options.webhookReceiver);
  const routes: Route[] = [
    { method: "GET", path: "/healthz", handler: ({ res }) => sendJson(res, 200, { ok: true }) },
    ...model.routes,
    ...ocr.routes,
    ...images.routes,
    ...marketplace.routes,
    ...webhookReceiver.routes,
  ];
  const server = http.createServer(createRouter(routes));

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
    server,
    model,
    ocr,
    images,
    marketplace,
    webhookReceiver,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
