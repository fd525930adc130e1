import { logger } from "@/lib/log";
import { abortedCall, recordModelCall, type ModelCallContext, type RecordModelCall } from "@/lib/modelcalls/record";
import { scaled, sleep } from "@/lib/time";
import type { ToolUse } from "./schemas";

const log = logger("agents.tools");

/**
 * Euro reference rates (units of the currency per 1 EUR). Illustrative and fixed: the tools are
 * deterministic so that a run can be repeated and tested.
 */
const EUR_RATES: Readonly<Record<string, number>> = {
  EUR: 1,
  USD: 1.08,
  GBP: 0.86,
  CHF: 0.95,
  SEK: 11.3,
  NOK: 11.6,
  DKK: 7.46,
  PLN: 4.3,
  CZK: 25.2,
  JPY: 162,
  CAD: 1.47,
  AUD: 1.65,
};

/** A tool refused its input; the step fails with this message, the run goes on. */
export class ToolError extends Error {
  override name = "ToolError";
}

type Values = Record<string, string | number>;

interface Tool {
  /**
   * Production latency of one call: the tools are local, deterministic code; production's tool
   * calls take tens of milliseconds (a table read, serialisation).
   */
  latencyMs: number;
  run(input: Values): Values;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

function money(amount: number, currency: string): string {
  const digits = currency === "JPY" ? 0 : 2;
  return `${amount.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })} ${currency}`;
}

const TOOLS = {
  /** The reference rate of a currency. */
  lookup_rate: {
    latencyMs: 30,
    run: ({ currency }) => {
      const code = String(currency).toUpperCase();
      const perEur = EUR_RATES[code];
      if (perEur === undefined)
        throw new ToolError(`no exchange rate for “${code}” (known: ${Object.keys(EUR_RATES).join(", ")})`);
      return { currency: code, perEur };
    },
  },
  /** An amount in a currency, converted to euros at a rate. */
  convert_amount: {
    latencyMs: 12,
    run: ({ amount, perEur }) => {
      const a = Number(amount);
      const r = Number(perEur);
      if (!Number.isFinite(a) || !(r > 0))
        throw new ToolError(`cannot convert ${String(amount)} at rate ${String(perEur)}`);
      return { eur: round2(a / r) };
    },
  },
  /** One line of the report a person reads. */
  format_line: {
    latencyMs: 18,
    run: ({ amount, currency, eur }) => ({
      line: `${money(Number(amount), String(currency))} ≈ ${money(Number(eur), "EUR")}`,
    }),
  },
} satisfies Record<string, Tool>;

export type ToolName = keyof typeof TOOLS;

export interface ToolCallOptions {
  /** The job's signal: an aborted call rejects with `signal.reason`, unchanged. */
  signal: AbortSignal;
  /** Written to the ModelCall row (type "tool", the tool's name as `model`). */
  context: ModelCallContext;
  /** @defaultValue `recordModelCall` */
  record?: RecordModelCall;
}

/** Calls one tool and records it as a ModelCall row of type "tool" (ok, error or aborted). */
export async function callTool(name: ToolName, input: Values, options: ToolCallOptions): Promise<ToolUse> {
  const { signal, context } = options;
  const record = options.record ?? recordModelCall;
  const tool: Tool = TOOLS[name];
  signal.throwIfAborted();
  const startedAt = new Date();
  const started = performance.now();
  const row = () => ({
    ...context,
    type: "tool" as const,
    model: name,
    startedAt,
    durationMs: performance.now() - started,
  });
  try {
    await sleep(scaled(tool.latencyMs), signal);
    const output = tool.run(input);
    void record({ ...row(), outcome: "ok" }).catch(() => undefined);
    return { tool: name, input, output };
  } catch (err) {
    const ending = signal.aborted
      ? abortedCall(signal.reason)
      : { outcome: "error" as const, error: err instanceof Error ? err.message : String(err) };
    void record({ ...row(), ...ending }).catch(() => undefined);
    if (signal.aborted) throw signal.reason;
    if (!(err instanceof ToolError)) log.error({ err, tool: name }, "tool failed unexpectedly");
    throw err;
  }
}
