import type { ChatMessage } from "@/lib/modelcalls/schemas";
import type { AgentStep } from "./schemas";
import type { ToolName } from "./tools";

/**
 * The agent's plan, worked out from the task alone so that a run can be repeated: the task's
 * currency codes and amounts ("convert 120 USD and 80 GBP") are taken in turn, one per step, and
 * each step chains 1–3 tools — look up the rate, convert the amount, format a line. Steps cycle
 * through 1, 2 and 3 tools.
 */
export interface PlannedStep {
  step: number;
  currency: string;
  amount: number;
  tools: ToolName[];
}

const DEFAULT_CURRENCIES = ["USD", "GBP", "CHF", "SEK", "JPY"];
const DEFAULT_AMOUNTS = [100];
const CHAIN: ToolName[] = ["lookup_rate", "convert_amount", "format_line"];

export function planStep(task: string, step: number): PlannedStep {
  const currencies = [...task.matchAll(/\b[A-Z]{3}\b/g)].map((m) => m[0]).filter((c) => c !== "EUR");
  const amounts = [...task.matchAll(/(?<![\w.])\d{1,9}(?:\.\d{1,2})?(?![\w.])/g)]
    .map((m) => Number(m[0]))
    .filter((n) => n > 0);
  const cs = currencies.length ? currencies : DEFAULT_CURRENCIES;
  const as = amounts.length ? amounts : DEFAULT_AMOUNTS;
  return {
    step,
    currency: cs[(step - 1) % cs.length]!,
    amount: as[(step - 1) % as.length]!,
    tools: CHAIN.slice(0, 1 + ((step - 1) % CHAIN.length)),
  };
}

/** How many earlier steps the model is shown: enough to keep its thread, short enough to stay cheap. */
const OBSERVATIONS_SHOWN = 5;

export function buildStepPrompt(
  task: string,
  plan: PlannedStep,
  steps: number,
  earlier: readonly AgentStep[],
): ChatMessage[] {
  const observations = earlier
    .slice(-OBSERVATIONS_SHOWN)
    .map((s) => `- step ${s.step}: ${s.tools.map((t) => `${t.tool} → ${JSON.stringify(t.output)}`).join("; ")}`);
  return [
    {
      role: "system",
      content:
        "You are an operations agent working through a task step by step. Tools: lookup_rate(currency), convert_amount(amount, perEur), " +
        "format_line(amount, currency, eur). Say in one short sentence what this step does.",
    },
    {
      role: "user",
      content: [
        `Task: ${task}`,
        `Step ${plan.step} of ${steps}: ${plan.amount} ${plan.currency}, tools ${plan.tools.join(", ")}.`,
        observations.length ? `Observations so far:\n${observations.join("\n")}` : "No observations yet.",
      ].join("\n"),
    },
  ];
}

/** The model's note for a step as stored: one line, at most 300 characters. */
export function cleanNote(content: string): string {
  const flat = content
    .replace(/<think>[\s\S]*?<\/think>/gi, "")
    .replace(/\s+/g, " ")
    .trim();
  return flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
}

/** The final answer, composed from the steps that finished (in step order). */
export function composeAnswer(task: string, steps: readonly AgentStep[], total: number): string {
  const done = [...steps].sort((a, b) => a.step - b.step);
  const failed = total - done.length;
  const lines: string[] = [];
  const rates = new Map<string, number>();
  let eurTotal = 0;
  let conversions = 0;
  for (const s of done) {
    for (const t of s.tools) {
      if (t.tool === "lookup_rate") rates.set(String(t.output.currency), Number(t.output.perEur));
      if (t.tool === "convert_amount") {
        eurTotal += Number(t.output.eur);
        conversions += 1;
      }
      if (t.tool === "format_line") lines.push(String(t.output.line));
    }
  }
  const head = `${done.length} of ${total} step${total === 1 ? "" : "s"} done${failed > 0 ? ` (${failed} failed)` : ""} for “${task.length > 80 ? `${task.slice(0, 79)}…` : task}”.`;
  if (done.length === 0) return `${head} No step finished, so there is no answer.`;
  const parts = [head];
  if (rates.size > 0) parts.push(`Rates per EUR: ${[...rates].map(([c, r]) => `${c} ${r}`).join(", ")}.`);
  if (conversions > 0)
    parts.push(
      `${conversions} conversion${conversions === 1 ? "" : "s"} totalling ${(Math.round(eurTotal * 100) / 100).toFixed(2)} EUR.`,
    );
  if (lines.length > 0) parts.push(`${lines.join("; ")}.`);
  return parts.join(" ");
}
