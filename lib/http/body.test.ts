import { describe, expect, it } from "vitest";
import { readBodyLimited } from "./body";
import { ApiError } from "./errors";

function chunked(chunks: number, size: number): Request {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ >= chunks) controller.close();
      else controller.enqueue(new Uint8Array(size).fill(97));
    },
  });
  // No Content-Length: the size is only known by counting.
  return new Request("http://x/api/imports", { method: "POST", body, duplex: "half" } as RequestInit);
}

describe("readBodyLimited", () => {
  it("reads a body within the limit", async () => {
    expect((await readBodyLimited(chunked(4, 1000), 10_000, "file")).byteLength).toBe(4000);
  });

  it("refuses a chunked body over the limit with 413 as soon as it passes, without a Content-Length", async () => {
    const err = await readBodyLimited(chunked(1000, 64 * 1024), 1024 * 1024, "file").catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 413, code: "upload_too_large" });
    expect(err.message).toMatch(/the limit is 1\.0 MB/);
  });

  it("refuses a declared Content-Length over the limit before reading", async () => {
    const request = new Request("http://x", {
      method: "POST",
      body: "x".repeat(10),
      headers: { "content-length": "999999999" },
    });
    await expect(readBodyLimited(request, 1000, "file")).rejects.toMatchObject({ status: 413 });
  });
});
