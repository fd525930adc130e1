import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";

/**
 * A `fetch` over node:http(s), for clients that take a `fetch` (the official OpenAI SDK): Node's
 * own fetch gives up on a response whose headers take longer than 300 s (undici's
 * `headersTimeout`, not configurable without the undici package), and production model calls
 * take up to ~11 min. Only `init.signal` limits the time. The body is streamed, so server-sent
 * events arrive as they are sent. Request bodies: a string or bytes (what JSON APIs send).
 */
export async function nodeFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const url = new URL(input instanceof Request ? input.url : input);
  const signal = init.signal ?? undefined;
  signal?.throwIfAborted();
  const body = requestBody(init.body);
  const headers: Record<string, string> = Object.fromEntries(new Headers(init.headers).entries());
  if (body !== undefined) headers["content-length"] = String(body.byteLength);
  const transport = url.protocol === "https:" ? https : http;

  return new Promise<Response>((resolve, reject) => {
    const request = transport.request(url, { method: init.method ?? "GET", headers, signal }, (response) => {
      const status = response.statusCode ?? 0;
      const responseHeaders = new Headers();
      const raw = response.rawHeaders;
      for (let i = 0; i + 1 < raw.length; i += 2) responseHeaders.append(raw[i]!, raw[i + 1]!);
      // A body is not allowed with these statuses (the Response constructor throws).
      const bodyless = init.method === "HEAD" || [101, 204, 205, 304].includes(status);
      if (bodyless) response.resume();
      resolve(
        new Response(bodyless ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>), {
          status,
          statusText: response.statusMessage,
          headers: responseHeaders,
        }),
      );
    });
    request.on("error", reject);
    request.end(body);
  });
}

function requestBody(body: RequestInit["body"]): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError("nodeFetch sends string or byte bodies only");
}
