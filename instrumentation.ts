/** Runs once when a web process starts, before it serves a request. */
export async function register() {
  if (process.env.NEXT_RUNTIME === "nodejs") {
    // Route handlers see no socket and no raw address: the server's own request hook stamps the
    // peer address and refuses addresses that do not decode (lib/security/peer-address.ts).
    const { installPeerAddressStamp } = await import("@/lib/security/peer-address");
    installPeerAddressStamp();
    // A progress poll whose answer this process holds is answered before Next.js routes it
    // (lib/progress/front-door.ts): a thousand polling pages cost the web next to nothing.
    const { installProgressFrontDoor } = await import("@/lib/progress/front-door");
    installProgressFrontDoor();
    // Spans of web requests, when OTEL_EXPORTER_OTLP_ENDPOINT is set (lib/tracing/tracing.ts).
    const { startTracing } = await import("@/lib/tracing/tracing");
    await startTracing();
  }
}
