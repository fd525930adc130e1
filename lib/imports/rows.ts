import { z } from "zod";
import { bigintProblem, dateProblem, textProblem } from "@/lib/db/storable";

/** ISO 4217 codes accepted in imports. */
export const CURRENCIES = ["EUR", "USD", "GBP", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "JPY", "CAD", "AUD"] as const;

/** A text the database can store as it is (no NUL, no lone surrogate), the row's reason naming the column. */
const storable = <T extends z.ZodType<string>>(name: string, schema: T) =>
  schema.superRefine((s, ctx) => {
    const problem = textProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: `${name} ${problem}` });
  });

const text = (name: string, max: number) =>
  storable(
    name,
    z
      .string({ error: `${name} is missing` })
      .trim()
      .min(1, `${name} is empty`)
      .max(max, `${name} is longer than ${max} characters`),
  );

/** Amounts like `-12.50`, `1234,56` or `1.234,56` → minor units (cents). */
function parseAmount(raw: string): bigint | null {
  const s = raw.trim().replace(/\s/g, "");
  const m = /^([+-]?)(\d{1,3}(?:[.,]\d{3})*|\d+)(?:[.,](\d{1,2}))?$/.exec(s);
  if (!m) return null;
  const [, sign, whole, frac = ""] = m;
  const digits = whole!.replace(/[.,]/g, "") + frac.padEnd(2, "0");
  const value = BigInt(digits);
  return sign === "-" ? -value : value;
}

/** One CSV row as the worker accepts it; the messages are what the end user reads. */
export const transactionRowSchema = z.object({
  date: z
    .string({ error: "date is missing" })
    .trim()
    .regex(/^\d{4}-\d{2}-\d{2}$/, "date must look like 2026-01-31")
    .refine((s) => {
      const d = new Date(`${s}T00:00:00Z`);
      return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(s);
    }, "date is not a real calendar date")
    .superRefine((s, ctx) => {
      const problem = dateProblem(s);
      if (problem) ctx.addIssue({ code: "custom", message: `date ${s} ${problem}` });
    }),
  amount: z.string({ error: "amount is missing" }).transform((s, ctx) => {
    const v = parseAmount(s);
    if (v === null) {
      ctx.addIssue({ code: "custom", message: `amount “${s.slice(0, 20)}” is not a number` });
      return z.NEVER;
    }
    if (v === 0n) {
      ctx.addIssue({ code: "custom", message: "amount is zero" });
      return z.NEVER;
    }
    const tooLarge = bigintProblem(v);
    if (tooLarge) {
      ctx.addIssue({ code: "custom", message: `amount ${tooLarge}` });
      return z.NEVER;
    }
    return v;
  }),
  currency: z
    .string({ error: "currency is missing" })
    .trim()
    .toUpperCase()
    .pipe(
      z.enum(CURRENCIES, {
        error: (i) => `currency “${String(i.input).slice(0, 10)}” is not one of ${CURRENCIES.join(", ")}`,
      }),
    ),
  counterparty: text("counterparty", 200),
  description: storable("description", z.string().trim().max(500, "description is longer than 500 characters")).default(
    "",
  ),
});

/** The first problem of a row, as one sentence. */
export function rowProblem(error: z.ZodError): string {
  return error.issues[0]?.message ?? "invalid row";
}

/** A row that passed validation: amounts in minor units. */
export type TransactionRow = z.output<typeof transactionRowSchema>;
