/**
 * A realistic bank export of one tenant, for benchmarks that care what rows look like (how often
 * the same counterparty comes back, how long and varied the descriptions are): a few hundred
 * counterparties whose frequencies fall off like Zipf's law — a handful of supermarkets, a
 * petrol station and a coffee shop make most card payments, most counterparties appear once or
 * twice — plus the monthly fixtures (salary, rent, utilities, insurance, subscriptions) on their
 * usual days. Descriptions carry what real ones carry: booking dates and times, card and terminal
 * numbers, SEPA end-to-end and mandate references, invoice and customer numbers, so almost no two
 * rows read the same even for one counterparty. Pure: the same options give the same export.
 *
 * The CSV has the columns the importer reads (`date,amount,currency,counterparty,description`,
 * docs/api.md → CSV files), comma-separated, quoted where needed, LF line endings.
 */

export interface BankExportOptions {
  /** Same seed, same export. @defaultValue 1 */
  seed?: number;
  /** The first day, `YYYY-MM-DD`; the export runs `months` calendar months from its month on. @defaultValue "2026-01-01" */
  start?: string;
  /** @defaultValue 2 */
  months?: number;
  /** Rows that are not monthly fixtures, per month (card payments, online shops, one-off transfers). @defaultValue 1200 */
  rowsPerMonth?: number;
  /** Counterparties of those rows. @defaultValue 300 */
  counterparties?: number;
  /** Zipf's exponent: the k-th most frequent counterparty comes back ∝ 1/k^s. @defaultValue 1.07 */
  zipf?: number;
  /** @defaultValue "EUR" */
  currency?: string;
}

/** One row as the importer reads it. */
export interface BankRow {
  date: string;
  /** `-12.50`: negative for money going out. */
  amount: string;
  currency: string;
  counterparty: string;
  description: string;
}

export type CounterpartyKind = "card" | "online" | "debit" | "transfer";

export interface Counterparty {
  name: string;
  kind: CounterpartyKind;
  /** Its Zipf rank among the counterparties of everyday rows (1 = most frequent); 0 for a monthly fixture. */
  rank: number;
}

export interface BankExport {
  /** By date, then as booked within the day. */
  rows: BankRow[];
  /** Every counterparty the export may use, everyday ones by rank first, then the fixtures. */
  counterparties: Counterparty[];
  csv: string;
}

/** mulberry32: small, fast, and good enough for test data. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CITIES = [
  "Berlin",
  "Hamburg",
  "München",
  "Köln",
  "Frankfurt",
  "Leipzig",
  "Dresden",
  "Stuttgart",
  "Düsseldorf",
  "Hannover",
];
/** Card merchants, the most frequent kinds of shop first. */
const CHAINS = [
  "REWE",
  "EDEKA",
  "ALDI SUED",
  "LIDL",
  "Kaufland",
  "NETTO Marken-Discount",
  "PENNY",
  "dm-drogerie markt",
  "Rossmann",
  "Aral Tankstelle",
  "Shell Station",
  "Starbucks",
  "McDonald's",
  "Backwerk",
  "IKEA",
  "MediaMarkt",
  "Saturn",
  "H&M",
  "Deutsche Bahn",
  "BVG Automat",
];
const ONLINE = [
  "Amazon.de",
  "Zalando SE",
  "Otto GmbH",
  "Lieferando.de",
  "Wolt",
  "Uber BV",
  "Booking.com",
  "Apple.com/bill",
];
const TRADES = [
  "Elektro",
  "Sanitär",
  "Malerbetrieb",
  "Steuerberatung",
  "Autowerkstatt",
  "Blumen",
  "Bäckerei",
  "Metzgerei",
  "Buchhandlung",
  "Optik",
  "Zahnarztpraxis",
  "Physiotherapie",
  "Apotheke",
  "Café",
  "Restaurant",
  "Reinigung",
  "Schlüsseldienst",
  "Fahrradladen",
];
const SURNAMES = [
  "Müller",
  "Schmidt",
  "Schneider",
  "Fischer",
  "Weber",
  "Meyer",
  "Wagner",
  "Becker",
  "Schulz",
  "Hoffmann",
  "Koch",
  "Richter",
  "Klein",
  "Wolf",
  "Schröder",
  "Neumann",
  "Schwarz",
  "Zimmermann",
  "Braun",
  "Krüger",
];
const GIVEN = ["Anna", "Lukas", "Marie", "Jonas", "Sophie", "Felix", "Lea", "Paul", "Emma", "Leon", "Mia", "Ben"];
const FORMS = ["GmbH", "GmbH & Co. KG", "e.K.", "KG", "OHG", "UG (haftungsbeschränkt)"];
const PURPOSES = [
  "Rechnung",
  "Anzahlung",
  "Auslagen",
  "Geschenk",
  "Essen",
  "Miete Garage",
  "Rückzahlung",
  "Beitrag",
  "Reparatur",
];

/** Monthly fixtures: day of the month, amount range (negative: out), description. */
const FIXTURES: { name: string; day: number; min: number; max: number; what: string }[] = [
  { name: "Muster Consulting GmbH", day: 28, min: 3_850, max: 3_850, what: "LOHN/GEHALT" },
  { name: "Hausverwaltung Krüger & Partner KG", day: 1, min: -1_240, max: -1_240, what: "Miete" },
  { name: "Stadtwerke Energie GmbH", day: 15, min: -96, max: -96, what: "Abschlag Strom/Gas" },
  { name: "Telekom Deutschland GmbH", day: 8, min: -49.95, max: -49.95, what: "Festnetz/Internet" },
  { name: "Vodafone GmbH", day: 12, min: -29.99, max: -34.99, what: "Mobilfunk" },
  { name: "Allianz Versicherungs-AG", day: 1, min: -38.4, max: -38.4, what: "Beitrag Hausrat" },
  { name: "Techniker Krankenkasse", day: 15, min: -112.8, max: -112.8, what: "Beitrag Zusatzversicherung" },
  { name: "Netflix International B.V.", day: 5, min: -13.99, max: -13.99, what: "Abo" },
  { name: "Spotify AB", day: 20, min: -10.99, max: -10.99, what: "Premium" },
  { name: "Fitnessstudio FitX GmbH", day: 3, min: -24.99, max: -24.99, what: "Mitgliedsbeitrag" },
  { name: "Sparkasse", day: 30, min: -7.9, max: -7.9, what: "Kontoführungsgebühr" },
];
const MONTHS_DE = [
  "Januar",
  "Februar",
  "März",
  "April",
  "Mai",
  "Juni",
  "Juli",
  "August",
  "September",
  "Oktober",
  "November",
  "Dezember",
];

/** The counterparties of everyday rows, most frequent first: chains' branches, online shops, local trades, people. */
function everydayCounterparties(count: number, random: () => number): Counterparty[] {
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const names = new Set<string>();
  const out: Counterparty[] = [];
  const add = (name: string, kind: CounterpartyKind) => {
    if (names.has(name) || out.length >= count) return;
    names.add(name);
    out.push({ name, kind, rank: out.length + 1 });
  };
  // The head: the branches one goes to every week (two supermarkets, a drugstore, a petrol station, a café…).
  for (const chain of CHAINS.slice(0, 12)) add(`${chain} ${pick(CITIES)}`, "card");
  for (const shop of ONLINE.slice(0, 4)) add(shop, "online");
  let guard = 0;
  while (out.length < count && guard++ < count * 50) {
    const r = random();
    if (r < 0.35) add(`${pick(CHAINS)} ${pick(CITIES)} ${100 + Math.floor(random() * 9_000)}`, "card");
    else if (r < 0.65) add(`${pick(TRADES)} ${pick(SURNAMES)} ${pick(FORMS)}`, random() < 0.7 ? "card" : "debit");
    else if (r < 0.75) add(pick(ONLINE), "online");
    else add(`${pick(GIVEN)} ${pick(SURNAMES)}`, "transfer");
  }
  return out;
}

/** Cumulative Zipf weights of ranks 1..n, for sampling by binary search. */
function zipfCumulative(n: number, s: number): number[] {
  const cumulative: number[] = [];
  let sum = 0;
  for (let k = 1; k <= n; k++) {
    sum += 1 / k ** s;
    cumulative.push(sum);
  }
  return cumulative.map((c) => c / sum);
}

function sampleIndex(cumulative: number[], u: number): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");
const isoDay = (d: Date) => d.toISOString().slice(0, 10);
const germanDay = (d: Date) => `${pad(d.getUTCDate())}.${pad(d.getUTCMonth() + 1)}.${d.getUTCFullYear()}`;
const money = (value: number) => (Math.round(value * 100) / 100).toFixed(2);

/** A bank export as described above; the same options give the same export. */
export function generateBankExport(options: BankExportOptions = {}): BankExport {
  const random = seeded(options.seed ?? 1);
  const months = options.months ?? 2;
  const perMonth = options.rowsPerMonth ?? 1200;
  const currency = options.currency ?? "EUR";
  const start = new Date(`${(options.start ?? "2026-01-01").slice(0, 7)}-01T00:00:00Z`);
  if (Number.isNaN(start.getTime())) throw new RangeError(`start must be YYYY-MM-DD, not ${options.start}`);
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const digits = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 10)).join("");

  // The account's two cards: their last digits come back on every card payment.
  const cards = [digits(4), digits(4)];
  const everyday = everydayCounterparties(options.counterparties ?? 300, random);
  const cumulative = zipfCumulative(everyday.length, options.zipf ?? 1.07);
  const fixtures: Counterparty[] = FIXTURES.map((f) => ({ name: f.name, kind: "debit", rank: 0 }));
  /** Each debtor's mandate, so its direct debits carry the same MREF month after month, as banks show them. */
  const mandates = new Map<string, string>();
  const mandateOf = (name: string) => mandates.get(name) ?? mandates.set(name, `M${digits(8)}`).get(name)!;

  const booked: (BankRow & { order: number })[] = [];
  const book = (day: Date, amount: number, counterparty: string, description: string) =>
    booked.push({
      date: isoDay(day),
      amount: money(amount),
      currency,
      counterparty,
      description: description.slice(0, 140),
      order: random(),
    });

  for (let m = 0; m < months; m++) {
    const monthStart = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + m, 1));
    const days = new Date(Date.UTC(monthStart.getUTCFullYear(), monthStart.getUTCMonth() + 1, 0)).getUTCDate();
    const monthName = `${MONTHS_DE[monthStart.getUTCMonth()]} ${monthStart.getUTCFullYear()}`;
    const dayOf = (d: number) => new Date(Date.UTC(monthStart.getUTCFullYear(), monthStart.getUTCMonth(), d));

    for (const f of FIXTURES) {
      const day = dayOf(Math.min(f.day, days));
      const amount = f.min + random() * (f.max - f.min);
      const description =
        amount > 0
          ? `${f.what} ${monthName} Personalnr. ${digits(5)} EREF+${digits(14)}`
          : `SEPA-LASTSCHRIFT EREF+${digits(12)} MREF+${mandateOf(f.name)} CRED+DE${digits(2)}ZZZ${digits(11)} SVWZ+${f.what} ${monthName} Kd-Nr. ${digits(8)}`;
      book(day, amount, f.name, description);
    }

    for (let i = 0; i < perMonth; i++) {
      const cp = everyday[sampleIndex(cumulative, random())]!;
      const day = dayOf(1 + Math.floor(random() * days));
      // Bookings come a day or two after the purchase; the description keeps the purchase's date.
      const bought = new Date(day.getTime() - Math.floor(random() * 3) * 86_400_000);
      const time = `${pad(7 + Math.floor(random() * 14))}:${pad(Math.floor(random() * 60))}`;
      const dm = `${pad(bought.getUTCDate())}.${pad(bought.getUTCMonth() + 1)}`;
      switch (cp.kind) {
        case "card": {
          // Everyday card payments: mostly small, a few larger (a week's shop, a repair).
          const amount = -Math.exp(Math.log(4) + random() * random() * Math.log(60));
          const description =
            random() < 0.6
              ? `KARTENZAHLUNG ${dm} ${time} ${cp.name} Karte ${pick(cards)} girocard TE ${digits(8)}`
              : `VISA Debit ${germanDay(bought)} ${cp.name.toUpperCase()} ARN${digits(23)}`;
          book(day, amount, cp.name, description);
          break;
        }
        case "online": {
          const amount = -(8 + random() * random() * 240);
          const order = `${digits(3)}-${digits(7)}-${digits(7)}`;
          const description =
            random() < 0.5
              ? `PayPal Europe S.a.r.l. et Cie S.C.A ${digits(13)} PP.${digits(4)}.PP . ${cp.name}, Ihr Einkauf bei ${cp.name}`
              : `SEPA-LASTSCHRIFT ${cp.name} ${order} Bestellung vom ${germanDay(bought)} EREF+${digits(12)}`;
          book(day, amount, cp.name, description);
          break;
        }
        case "debit": {
          const amount = -(20 + random() * random() * 900);
          const description = `SEPA-LASTSCHRIFT EREF+RE-${digits(6)} MREF+${mandateOf(cp.name)} SVWZ+Rechnung Nr. ${digits(5)} vom ${germanDay(bought)} Kd-Nr. ${digits(6)}`;
          book(day, amount, cp.name, description);
          break;
        }
        case "transfer": {
          const incoming = random() < 0.3;
          const amount = (incoming ? 1 : -1) * (5 + Math.floor(random() * random() * 400));
          const description = `${incoming ? "SEPA-GUTSCHRIFT" : "SEPA-ÜBERWEISUNG"} ${incoming ? "von" : "an"} ${cp.name} SVWZ+${pick(PURPOSES)} ${germanDay(bought)} EREF+NOTPROVIDED`;
          book(day, amount, cp.name, description);
          break;
        }
      }
    }
  }

  booked.sort((a, b) => a.date.localeCompare(b.date) || a.order - b.order);
  const rows: BankRow[] = booked.map(({ order: _order, ...row }) => row);
  return { rows, counterparties: [...everyday, ...fixtures], csv: bankExportCsv(rows) };
}

/** The rows as the importer reads them: a header, one line a row, fields quoted where CSV needs it. */
export function bankExportCsv(rows: readonly BankRow[]): string {
  const field = (value: string) => (/[",\n\r]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);
  const lines = ["date,amount,currency,counterparty,description"];
  for (const r of rows) lines.push([r.date, r.amount, r.currency, r.counterparty, r.description].map(field).join(","));
  return `${lines.join("\n")}\n`;
}
