/**
 * Small, well-formed documents of each supported type (and damaged ones), for demos and tests.
 * No imports on purpose: the browser tests use this file too.
 */

const enc = (s: string) => new TextEncoder().encode(s);
const latin1 = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);

/** A one- or more-page PDF whose pages draw `lines` as text (one line per page). */
export function samplePdf(lines: string[] = ["Invoice 2026-17 from Acme GmbH", "Total due: 1,234.56 EUR"]): Uint8Array {
  const esc = (s: string) => s.replace(/[\\()]/g, (c) => `\\${c}`);
  const pages = lines.map((_, i) => `${3 + i * 2} 0 R`).join(" ");
  const objects = [
    "1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj",
    `2 0 obj << /Type /Pages /Kids [${pages}] /Count ${lines.length} >> endobj`,
    ...lines.flatMap((line, i) => {
      const stream = `BT /F1 12 Tf 72 712 Td (${esc(line)}) Tj ET`;
      return [
        `${3 + i * 2} 0 obj << /Type /Page /Parent 2 0 R /Contents ${4 + i * 2} 0 R >> endobj`,
        `${4 + i * 2} 0 obj << /Length ${stream.length} >> stream\n${stream}\nendstream endobj`,
      ];
    }),
  ];
  return latin1(`%PDF-1.4\n${objects.join("\n")}\ntrailer << /Root 1 0 R >>\n%%EOF\n`);
}

/** A PDF cut off in the middle, as an interrupted download leaves it: no end-of-file marker. */
export function truncatedPdf(): Uint8Array {
  const whole = samplePdf(["This scan was cut short"]);
  return whole.subarray(0, Math.floor(whole.length * 0.6));
}

/** A password-protected PDF (an `/Encrypt` dictionary in the trailer). */
export function encryptedPdf(): Uint8Array {
  return latin1("%PDF-1.6\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R /Encrypt 2 0 R >>\n%%EOF\n");
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  out.set(latin1(type), 4);
  out.set(data, 8);
  // CRC left as zeros: the simulated OCR does not check it.
  return out;
}

/** A PNG header with its IHDR and IEND chunks (no pixel data: OCR is simulated). */
export function samplePng(width = 640, height = 480): Uint8Array {
  const ihdr = new Uint8Array(13);
  const view = new DataView(ihdr.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const parts = [
    Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", new Uint8Array(16)),
    chunk("IEND", new Uint8Array(0)),
  ];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A JPEG's start and end markers around a little filler. */
export function sampleJpeg(): Uint8Array {
  return Uint8Array.from([
    0xff,
    0xd8,
    0xff,
    0xe0,
    0x00,
    0x10,
    ...latin1("JFIF\0"),
    1,
    1,
    0,
    0,
    1,
    0,
    1,
    0,
    0,
    0xff,
    0xd9,
  ]);
}

/** A little-endian TIFF with `pages` empty image directories. */
export function sampleTiff(pages = 1): Uint8Array {
  const out = new Uint8Array(8 + pages * 6);
  const view = new DataView(out.buffer);
  out.set(latin1("II*\0"));
  view.setUint32(4, 8, true);
  for (let p = 0; p < pages; p++) {
    const at = 8 + p * 6;
    view.setUint16(at, 0, true);
    view.setUint32(at + 2, p + 1 < pages ? at + 6 : 0, true);
  }
  return out;
}

export function sampleText(
  text = "Rental agreement\nbetween Vermieter GmbH and Jane Doe\nMonthly rent: 950.00 EUR\n",
): Uint8Array {
  return enc(text);
}
