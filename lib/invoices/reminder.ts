import { ItemError } from "@/lib/core/signals";
import { formatCount } from "@/lib/format/number";

/** Currencies invoices are issued in, with their minor-unit digits (ISO 4217). */
const INVOICE_CURRENCIES: Readonly<Record<string, number>> = {
  EUR: 2,
  USD: 2,
  GBP: 2,
  CHF: 2,
  SEK: 2,
  NOK: 2,
  DKK: 2,
  PLN: 2,
  CZK: 2,
  JPY: 0,
  CAD: 2,
  AUD: 2,
};

export interface RemindableInvoice {
  number: string;
  amountMinor: bigint;
  currency: string;
  dueDate: Date;
}

const DAY_MS = 86_400_000;

/** `2026-01-31` → "31 January 2026". */
function longDate(d: Date): string {
  return d.toLocaleDateString("en-GB", { day: "numeric", month: "long", year: "numeric", timeZone: "UTC" });
}

/** Minor units as the amount a person reads: 123456n EUR → "1,234.56 EUR"; exact for any size. */
export function formatAmount(amountMinor: bigint, currency: string): string {
  const digits = INVOICE_CURRENCIES[currency];
  if (digits === undefined)
    throw new ItemError(
      `currency “${currency}” is not one invoices are issued in (${Object.keys(INVOICE_CURRENCIES).join(", ")})`,
    );
  const negative = amountMinor < 0n;
  const abs = negative ? -amountMinor : amountMinor;
  const unit = 10n ** BigInt(digits);
  const whole = formatCount(abs / unit);
  const fraction = digits > 0 ? `.${(abs % unit).toString().padStart(digits, "0")}` : "";
  return `${negative ? "-" : ""}${whole}${fraction} ${currency}`;
}

/**
 * The reminder text the sweep writes on an invoice it marks overdue. Refuses (with an
 * `ItemError`, that invoice's failure) what no reminder can be sent for: an unknown currency, an
 * amount that is not positive (a credit note is not owed), a due date that has not passed.
 *
 * @param asOf - the sweep's day, `YYYY-MM-DD` (UTC): days overdue are counted to it.
 */
export function formatReminder(invoice: RemindableInvoice, asOf: string): string {
  if (INVOICE_CURRENCIES[invoice.currency] === undefined) {
    throw new ItemError(
      `invoice ${invoice.number}: currency “${invoice.currency}” is not one invoices are issued in (${Object.keys(INVOICE_CURRENCIES).join(", ")})`,
    );
  }
  const amount = formatAmount(invoice.amountMinor, invoice.currency);
  if (invoice.amountMinor <= 0n) {
    throw new ItemError(
      `invoice ${invoice.number}: the amount is ${amount}; only a positive amount can be overdue (is it a credit note?)`,
    );
  }
  const days = Math.round((Date.parse(`${asOf}T00:00:00Z`) - invoice.dueDate.getTime()) / DAY_MS);
  if (!(days > 0))
    throw new ItemError(`invoice ${invoice.number}: it is not past its due date (${longDate(invoice.dueDate)})`);
  return (
    `Invoice ${invoice.number} for ${amount} was due on ${longDate(invoice.dueDate)} and is ${days} day${days === 1 ? "" : "s"} overdue. ` +
    "Please pay it as soon as possible; if you have paid it already, please ignore this reminder."
  );
}
