/**
 * A TCP proxy in front of the real PostgreSQL or Redis that a test can cut: "down" closes every
 * open connection and stops listening (new connections are refused, as when the server is
 * stopped), "hang" keeps accepting but forwards nothing (as a partitioned network), "up" restores
 * it on the same port. Tests of outages use it instead of stopping the shared servers: only the
 * connections that go through the proxy see the outage.
 */
import net from "node:net";
import { vi } from "vitest";

export interface CuttableProxy {
  port: number;
  /** The state the proxy is in. */
  state(): "up" | "down" | "hang";
  down(): Promise<void>;
  hang(): void;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<CuttableProxy> {
  let state: "up" | "down" | "hang" = "up";
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => undefined);
    if (state === "hang") return;
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  const cutAll = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  return {
    port,
    state: () => state,
    async down() {
      state = "down";
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    hang() {
      state = "hang";
      // Open connections stop answering too: nothing flows in either direction.
      for (const s of sockets) s.pause();
    },
    async up() {
      if (state === "hang") cutAll();
      if (state === "down") await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
      state = "up";
    },
    async close() {
      cutAll();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The test worker's database (test/worker-env.ts names it), reached directly. */
export const TEST_DATABASE_URL = process.env.DATABASE_URL!;

/**
 * Proxies in front of the shared PostgreSQL and Redis, with `DATABASE_URL` and `REDIS_URL` pointed
 * at them: the code under test (imported after this) reaches both only through proxies the test
 * can cut, while the test itself can still read the database directly.
 */
export async function proxyDependencies(): Promise<{ pgProxy: CuttableProxy; redisProxy: CuttableProxy }> {
  const pgProxy = await startProxy(5432);
  const redisProxy = await startProxy(6379);
  const url = new URL(TEST_DATABASE_URL);
  url.port = String(pgProxy.port);
  vi.stubEnv("DATABASE_URL", url.toString());
  vi.stubEnv("REDIS_URL", `redis://127.0.0.1:${redisProxy.port}`);
  return { pgProxy, redisProxy };
}
