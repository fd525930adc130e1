import { describe, expect, it } from "vitest";
import { documentProblem, inspectDocuments, sniffDocumentType } from "./inspect-documents";
import { sampleJpeg, samplePdf, samplePng, sampleText, sampleTiff, truncatedPdf } from "./sample-documents";

const limits = { maxFiles: 95, maxFileBytes: 1024, maxTotalBytes: 4096 };
const doc = (filename: string, bytes: Uint8Array) => ({ filename, bytes });

describe("sniffDocumentType: the type comes from the bytes, never the name", () => {
  it("recognises PDF, PNG, JPEG, TIFF (both byte orders) and UTF-8 text", () => {
    expect(sniffDocumentType(samplePdf())).toBe("application/pdf");
    expect(sniffDocumentType(samplePng())).toBe("image/png");
    expect(sniffDocumentType(sampleJpeg())).toBe("image/jpeg");
    expect(sniffDocumentType(sampleTiff())).toBe("image/tiff");
    expect(sniffDocumentType(Uint8Array.from([0x4d, 0x4d, 0x00, 0x2a, 0, 0, 0, 8]))).toBe("image/tiff");
    expect(sniffDocumentType(sampleText("Grüße aus Köln\r\n\tTabelle\f"))).toBe("text/plain");
  });

  it("a damaged PDF is still a PDF: only OCR can tell it is unreadable", () => {
    expect(sniffDocumentType(truncatedPdf())).toBe("application/pdf");
    expect(documentProblem(truncatedPdf(), 1024 * 1024)).toBeNull();
  });

  it("refuses binary data, Latin-1 text, UTF-16, ZIP/Office, GIF", () => {
    expect(sniffDocumentType(Uint8Array.from([0, 1, 2, 3, 4]))).toBeNull();
    expect(sniffDocumentType(Uint8Array.from([0x4d, 0xfc, 0x6c, 0x6c, 0x65, 0x72]))).toBeNull();
    expect(sniffDocumentType(Uint8Array.from([0xff, 0xfe, 0x41, 0x00]))).toBeNull();
    expect(sniffDocumentType(Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]))).toBeNull();
    expect(sniffDocumentType(new TextEncoder().encode("GIF89a...."))).toBeNull();
  });
});

describe("documentProblem", () => {
  it("names what is wrong, with the status the upload answers", () => {
    expect(documentProblem(new Uint8Array(0), 1024)).toEqual({ status: 422, code: "empty_file", reason: "is empty" });
    expect(documentProblem(sampleText("  \n\t "), 1024)).toEqual({
      status: 422,
      code: "empty_file",
      reason: "contains no text",
    });
    expect(documentProblem(new Uint8Array(2048).fill(65), 1024)).toEqual({
      status: 413,
      code: "file_too_large",
      reason: "is 2.0 KB; the limit is 1.0 KB per document",
    });
    expect(documentProblem(Uint8Array.from([0x50, 0x4b, 0x03, 0x04]), 1024)).toEqual({
      status: 415,
      code: "unsupported_type",
      reason: "is a Word or Excel document or a ZIP archive; upload PDF, PNG, JPEG, TIFF or plain text",
    });
    expect(documentProblem(samplePng(), 1024)).toBeNull();
  });
});

describe("inspectDocuments: the whole batch is checked before anything is created", () => {
  it("accepts a mixed batch and stores the sniffed type of each file", () => {
    const result = inspectDocuments(
      [doc("a.pdf", samplePdf()), doc("b.txt", sampleText()), doc("c.tif", sampleTiff())],
      limits,
    );
    expect(result.ok).toBe(true);
    if (result.ok)
      expect(result.files.map((f) => f.contentType)).toEqual(["application/pdf", "text/plain", "image/tiff"]);
  });

  it("refuses the batch at its first bad file, naming the file's number and name", () => {
    const result = inspectDocuments(
      [doc("a.pdf", samplePdf()), doc("b.txt", sampleText()), doc("empty.pdf", new Uint8Array(0))],
      limits,
    );
    expect(result).toEqual({
      ok: false,
      status: 422,
      code: "empty_file",
      message: "File 3 (“empty.pdf”) is empty. Nothing was uploaded.",
    });
    const zip = inspectDocuments([doc("report.docx", Uint8Array.from([0x50, 0x4b, 0x03, 0x04]))], limits);
    expect(zip).toMatchObject({ ok: false, status: 415, code: "unsupported_type" });
  });

  it("refuses no files, too many files and too many bytes together", () => {
    expect(inspectDocuments([], limits)).toMatchObject({ ok: false, status: 422, code: "no_files" });
    const many = Array.from({ length: 96 }, (_, i) => doc(`${i}.txt`, sampleText("x")));
    expect(inspectDocuments(many, limits)).toMatchObject({
      ok: false,
      status: 413,
      code: "too_many_files",
      message: expect.stringContaining("the limit is 95"),
    });
    const heavy = Array.from({ length: 5 }, (_, i) => doc(`${i}.txt`, new Uint8Array(1000).fill(65)));
    expect(inspectDocuments(heavy, limits)).toMatchObject({ ok: false, status: 413, code: "batch_too_large" });
  });
});
