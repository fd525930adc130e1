/** Bank-transaction CSVs for the tests, with known bad rows. */
import { distinctWord } from "../lib/format/distinct-word";

const COUNTERPARTIES = [
  "REWE Markt",
  "Uber BV",
  "DB Bahn",
  "ACME GmbH salary",
  "Amazon EU",
  "Stadtwerke Nord",
  "Pizzeria Roma",
  "Apotheke am Markt",
  "Netflix",
  "Lufthansa",
];

/** Ten kinds of broken row, each with the reason the import must give. */
export const BAD_ROWS: { line: string; reason: RegExp }[] = [
  { line: "2026-02-30,12.00,EUR,REWE Markt,impossible date", reason: /not a real calendar date/ },
  { line: "31/01/2026,12.00,EUR,REWE Markt,wrong date format", reason: /date must look like/ },
  { line: "2026-01-05,twelve,EUR,REWE Markt,amount in words", reason: /is not a number/ },
  { line: "2026-01-05,0.00,EUR,REWE Markt,zero amount", reason: /amount is zero/ },
  { line: "2026-01-05,12.00,XYZ,REWE Markt,unknown currency", reason: /currency “XYZ” is not one of/ },
  { line: "2026-01-05,12.00,EUR,,no counterparty", reason: /counterparty is empty/ },
  { line: "2026-01-05,12.00,EUR,REWE Markt", reason: /row has 4 fields, expected 5/ },
  { line: "2026-01-05,12.00,EUR,REWE Markt,too,many", reason: /row has 6 fields, expected 5/ },
  { line: ",12.00,EUR,REWE Markt,no date", reason: /date must look like/ },
  { line: "2026-01-05,,EUR,REWE Markt,no amount", reason: /is not a number/ },
];

export function transactionsCsv(
  rows: number,
  badEvery: number | null = null,
): { csv: string; badRows: { row: number; reason: RegExp }[] } {
  const lines = ["date,amount,currency,counterparty,description"];
  const badRows: { row: number; reason: RegExp }[] = [];
  let bad = 0;
  for (let i = 1; i <= rows; i++) {
    const spreadsheetRow = i + 1;
    if (badEvery && i % badEvery === 0) {
      const b = BAD_ROWS[bad % BAD_ROWS.length]!;
      bad += 1;
      lines.push(b.line);
      badRows.push({ row: spreadsheetRow, reason: b.reason });
      continue;
    }
    const day = String((i % 28) + 1).padStart(2, "0");
    const month = String((i % 12) + 1).padStart(2, "0");
    const amount = `${i % 3 === 0 ? "" : "-"}${((i * 7) % 900) + 1}.${String(i % 100).padStart(2, "0")}`;
    lines.push(
      `2026-${month}-${day},${amount},EUR,${COUNTERPARTIES[i % COUNTERPARTIES.length]},Payment ${distinctWord(i)}`,
    );
  }
  return { csv: `${lines.join("\n")}\n`, badRows };
}
