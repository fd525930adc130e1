import http from "node:http";
import type { AddressInfo } from "node:net";
import { createMarketplaceSimulator, type MarketplaceSimulator, type MarketplaceSimulatorOptions } from "./marketplace";
import { createImageSimulator, type ImageSimulator, type ImageSimulatorOptions } from "./images";
import { createModelSimulator, type ModelSimulator, type ModelSimulatorOptions } from "./model";
import { createOcrSimulator, type OcrSimulator, type OcrSimulatorOptions } from "./ocr";
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
}

export interface RunningSimulators {
  /** Base URL, e.g. `http://127.0.0.1:4010` (what MODEL_BASE_URL points at). */
  url: string;
  server: http.Server;
  model: ModelSimulator;
  ocr: OcrSimulator;
  images: ImageSimulator;
  marketplace: MarketplaceSimulator;
  /** Stops accepting, drops in-flight calls (their callers see a network error), resolves when closed. */
  close(): Promise<void>;
}

/** Starts every simulator of the outside services on one HTTP server. */
export async function startSimulators(options: SimulatorsOptions = {}): Promise<RunningSimulators> {
  const model = createModelSimulator(options.model);
  const ocr = createOcrSimulator(options.ocr);
  const images = createImageSimulator(options.images);
  const marketplace = createMarketplaceSimulator(options.marketplace);
  const routes: Route[] = [
    { method: "GET", path: "/healthz", handler: ({ res }) => sendJson(res, 200, { ok: true }) },
    ...model.routes,
    ...ocr.routes,
    ...images.routes,
    ...marketplace.routes,
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

  return {
    url: `http://${address}:${port}`,
    server,
    model,
    ocr,
    images,
    marketplace,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
