import http from "node:http";
import https from "node:https";

export interface HttpResponse {
  status: number;
  /** A response header by case-insensitive name (the first value when repeated). */
  header(name: string): string | undefined;
  body: string;
}

/** Sends one POST and reads the whole response; rejects on network errors and on abort. */
export type HttpPost = (
  url: URL,
  body: string,
  headers: Record<string, string>,
  signal: AbortSignal,
) => Promise<HttpResponse>;

/**
 * POST over node:http(s) rather than `fetch`: Node's fetch gives up on a response whose headers
 * take longer than 300 s (undici's `headersTimeout`, not configurable without the undici
 * package), and production model calls take up to ~11 min. Here the caller's signal is the
 * only time limit.
 */
export const postJson: HttpPost = (url, body, headers, signal) =>
  new Promise<HttpResponse>((resolve, reject) => {
    const transport = url.protocol === "https:" ? https : http;
    const request = transport.request(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        signal,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("error", reject);
        // A connection cut mid-body ends the stream without `complete`; resolve() already won otherwise.
        response.on("close", () => {
          if (!response.complete) reject(new Error("connection closed before the response was complete"));
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            header: (name) => {
              const value = response.headers[name.toLowerCase()];
              return Array.isArray(value) ? value[0] : value;
            },
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    request.on("error", reject);
    request.end(body);
  });
